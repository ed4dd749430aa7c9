package testutil

import (
	"regexp"
	"strings"
	"testing"
)

// UnitSetting is a systemd unit file's KEY=VALUE, the last one as systemd
// reads it (KEY may end in a value's start: Environment=NAME). A missing
// one fails the test.
func UnitSetting(t testing.TB, unit, key string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(key)+`=(.*)$`).FindAllStringSubmatch(unit, -1)
	if len(m) == 0 {
		t.Fatalf("the unit has no %s=", key)
	}
	return strings.TrimSpace(m[len(m)-1][1])
}
