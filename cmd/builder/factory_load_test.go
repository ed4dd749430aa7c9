package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodeforge/builder/internal/testutil"
)

// TestFactoryLoad: 200 clients for a minute (NODEFORGE_LOAD_SECONDS
// overrides) against two replicas on one registry, 70% of requests for
// cached artifacts and 30% for artifacts of new schematics: no answer but
// 200, or 503 with Retry-After when the build queue is full; p50 and p99
// per kind reported; each replica's peak RSS bounded.
func TestFactoryLoad(t *testing.T) {
	testutil.Slow(t) // a minute of load
	t.Parallel()     // see TestMain
	seconds := 60
	if v := os.Getenv("NODEFORGE_LOAD_SECONDS"); v != "" {
		seconds, _ = strconv.Atoi(v)
	}
	d := newDemoRelease(t)
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	target := reg.Host + "/nodeforge/p11"
	if _, err := d.publish(t, "--registry", target); err != nil {
		t.Fatal(err)
	}
	warmBuilder(t)
	replicas := []*replica{startReplica(t, d, target), startReplica(t, d, target)}
	post := func(r *replica, args string) (string, error) {
		resp, err := http.Post(r.url+"/schematics", "application/yaml", strings.NewReader("customization:\n  extraKernelArgs: ["+args+"]\n"))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 201 {
			return "", fmt.Errorf("POST /schematics: %d %s", resp.StatusCode, b)
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(string(b), `{"id":"`), `"`)
		return id, nil
	}
	kinds := []string{"kernel-amd64", "cmdline-metal-amd64", "initramfs-amd64.xz", "metal-amd64.iso"}
	var cached []string
	for i := range 4 {
		id, err := post(replicas[0], fmt.Sprintf("load.cached=%d", i))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kinds {
			p := "/image/" + id + "/1.11.0-demo/" + k
			if _, code, err := fetch(replicas[i%2].url + p); err != nil || code != 200 {
				t.Fatalf("warming %s: %d %v", p, code, err)
			}
			cached = append(cached, p)
		}
	}

	type sample struct {
		kind   string
		cached bool
		d      time.Duration
	}
	var mu sync.Mutex
	var samples []sample
	var problems []string
	codes := map[int]int{}
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	var wg sync.WaitGroup
	for c := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			client := &http.Client{Timeout: 5 * time.Minute}
			for n := 0; time.Now().Before(deadline); n++ {
				r := replicas[rng.IntN(2)]
				p, isCached := cached[rng.IntN(len(cached))], true
				if rng.IntN(10) < 3 {
					id, err := post(r, fmt.Sprintf("load.client=%d, load.n=%d", c, n))
					if err != nil {
						mu.Lock()
						problems = append(problems, err.Error())
						mu.Unlock()
						continue
					}
					p, isCached = "/image/"+id+"/1.11.0-demo/"+kinds[rng.IntN(len(kinds))], false
				}
				start := time.Now()
				resp, err := client.Get(r.url + p)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				el := time.Since(start)
				mu.Lock()
				switch {
				case err != nil:
					problems = append(problems, err.Error())
				case resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "":
					codes[503]++
				case resp.StatusCode != 200:
					problems = append(problems, fmt.Sprintf("%s: %d", p, resp.StatusCode))
				default:
					codes[200]++
					samples = append(samples, sample{kind: p[strings.LastIndex(p, "/")+1:], cached: isCached, d: el})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(problems) > 0 {
		t.Errorf("%d answers other than 200 and 503 with Retry-After, first: %s", len(problems), problems[0])
	}
	t.Logf("%d s, 200 clients, 2 replicas: %d answered 200, %d answered 503 (queue full)", seconds, codes[200], codes[503])
	for _, k := range kinds {
		for _, c := range []bool{true, false} {
			var ds []time.Duration
			for _, s := range samples {
				if s.kind == k && s.cached == c {
					ds = append(ds, s.d)
				}
			}
			if len(ds) == 0 {
				continue
			}
			slices.Sort(ds)
			t.Logf("%-22s cached=%-5t n=%-6d p50 %-10v p99 %v", k, c, len(ds), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)*99/100].Round(time.Millisecond))
		}
	}
	for i, r := range replicas {
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.cmd.Process.Pid))
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				t.Logf("replica %d: peak RSS %d MiB", i, kb/1024)
				if kb > 1<<20 {
					t.Errorf("replica %d: peak RSS %d MiB, over 1 GiB", i, kb/1024)
				}
			}
		}
	}
}
