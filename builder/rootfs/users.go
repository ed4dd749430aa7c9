package rootfs

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Account is one passwd entry.
type Account struct {
	Name, Comment, Home, Shell string
	UID, GID                   int
}

// Accounts are the users and groups of the image.
type Accounts struct {
	Users  map[string]*Account
	Groups map[string]int
	order  []string // users in the order they were added, for stable output
	gorder []string
}

// ParseAccounts reads passwd and group content (either may be empty).
func ParseAccounts(passwd, group []byte) (*Accounts, error) {
	a := &Accounts{Users: map[string]*Account{}, Groups: map[string]int{}}
	for i, line := range strings.Split(string(group), "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) < 3 {
			return nil, fmt.Errorf("/etc/group line %d: want name:password:gid[:members]", i+1)
		}
		gid, err := strconv.Atoi(f[2])
		if err != nil || gid < 0 {
			return nil, fmt.Errorf("/etc/group line %d: bad gid %q", i+1, f[2])
		}
		a.AddGroup(f[0], gid)
	}
	for i, line := range strings.Split(string(passwd), "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) != 7 {
			return nil, fmt.Errorf("/etc/passwd line %d: want 7 fields", i+1)
		}
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
			return nil, fmt.Errorf("/etc/passwd line %d: bad uid or gid", i+1)
		}
		a.AddUser(&Account{Name: f[0], UID: uid, GID: gid, Comment: f[4], Home: f[5], Shell: f[6]})
	}
	if _, ok := a.Groups["root"]; !ok {
		a.AddGroup("root", 0)
	}
	if _, ok := a.Users["root"]; !ok {
		a.AddUser(&Account{Name: "root", Comment: "root", Home: "/root", Shell: "/bin/sh"})
	}
	return a, nil
}

// AddGroup adds a group unless it exists; it returns its gid.
func (a *Accounts) AddGroup(name string, gid int) int {
	if g, ok := a.Groups[name]; ok {
		return g
	}
	a.Groups[name] = gid
	a.gorder = append(a.gorder, name)
	return gid
}

// AddUser adds a user unless it exists.
func (a *Accounts) AddUser(u *Account) {
	if _, ok := a.Users[u.Name]; ok {
		return
	}
	a.Users[u.Name] = u
	a.order = append(a.order, u.Name)
}

// FreeSystemID returns the highest unused id below 1000 (system accounts
// count down from 999, as shadow-utils allocates them).
func (a *Accounts) FreeSystemID(group bool) int {
	used := map[int]bool{}
	if group {
		for _, g := range a.Groups {
			used[g] = true
		}
	} else {
		for _, u := range a.Users {
			used[u.UID] = true
		}
	}
	for id := 999; id > 0; id-- {
		if !used[id] {
			return id
		}
	}
	return -1
}

// Owners returns the name to id maps the writers use.
func (a *Accounts) Owners() Owners {
	o := Owners{Users: map[string]int{}, Groups: map[string]int{}}
	for n, u := range a.Users {
		o.Users[n] = u.UID
	}
	for n, g := range a.Groups {
		o.Groups[n] = g
	}
	return o
}

// Files renders /etc/passwd, /etc/group and /etc/shadow, sorted by id then
// name so the output never depends on the order packages were laid.
func (a *Accounts) Files() (passwd, group, shadow []byte) {
	users := append([]string(nil), a.order...)
	sort.Slice(users, func(i, j int) bool {
		ui, uj := a.Users[users[i]], a.Users[users[j]]
		if ui.UID != uj.UID {
			return ui.UID < uj.UID
		}
		return ui.Name < uj.Name
	})
	var p, s strings.Builder
	for _, n := range users {
		u := a.Users[n]
		fmt.Fprintf(&p, "%s:x:%d:%d:%s:%s:%s\n", u.Name, u.UID, u.GID, u.Comment, u.Home, u.Shell)
		// No passwords on an API-managed node: every account is locked.
		fmt.Fprintf(&s, "%s:!*:::::::\n", u.Name)
	}
	groups := append([]string(nil), a.gorder...)
	sort.Slice(groups, func(i, j int) bool {
		gi, gj := a.Groups[groups[i]], a.Groups[groups[j]]
		if gi != gj {
			return gi < gj
		}
		return groups[i] < groups[j]
	})
	var g strings.Builder
	for _, n := range groups {
		fmt.Fprintf(&g, "%s:x:%d:\n", n, a.Groups[n])
	}
	return []byte(p.String()), []byte(g.String()), []byte(s.String())
}
