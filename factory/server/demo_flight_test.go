package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestFactoryOneBuildForConcurrentRequests: twenty clients asking at once
// for one uncached artifact of the demo release get one build and the same
// bytes. It runs under the race detector, unlike TestFactoryServe, which
// checks every served medium against builder image --release.
func TestFactoryOneBuildForConcurrentRequests(t *testing.T) {
	f := newDemoFactory(t)
	resp, err := http.Post(f.hs.URL+"/schematics", "application/yaml", strings.NewReader("customization:\n  systemExtensions:\n    officialExtensions: [zfs]\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var created struct{ ID string }
	if err := json.Unmarshal(b, &created); err != nil || resp.StatusCode != 201 || len(created.ID) != 64 {
		t.Fatalf("POST schematic: %d %s", resp.StatusCode, b)
	}
	before := f.srv.Stats()
	bodies := make([][]byte, 20)
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(f.hs.URL + "/image/" + created.ID + "/1.11.0-demo/aws-amd64.vhd") // not among aws's own formats
			if err != nil {
				t.Errorf("client %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("client %d: %s", i, resp.Status)
			}
			bodies[i], _ = io.ReadAll(resp.Body)
		}()
	}
	wg.Wait()
	if st := f.srv.Stats(); st.Builds != before.Builds+1 {
		t.Errorf("20 concurrent requests for one artifact: %d builds", st.Builds-before.Builds)
	}
	for i, b := range bodies {
		if len(b) == 0 || !bytes.Equal(b, bodies[0]) {
			t.Errorf("client %d got %d bytes, client 0 %d, not the same", i, len(b), len(bodies[0]))
		}
	}
}
