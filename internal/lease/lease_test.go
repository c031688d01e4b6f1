package lease

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// The lease changes while any Keep of its folder is unreleased, at the
// pace of the shortest TTL, and stops changing once all are released.
func TestKeepRenewsUntilReleased(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, probes.LeaseFile)
	slow, err := Keep(dir, time.Hour) // renews every 7.5 min
	if err != nil {
		t.Fatal(err)
	}
	fast, err := Keep(dir, 800*time.Millisecond) // every 100 ms
	if err != nil {
		t.Fatal(err)
	}
	changes := func(d time.Duration) int {
		n, last := 0, read(t, path)
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if b := read(t, path); !bytes.Equal(b, last) {
				n, last = n+1, b
			}
		}
		return n
	}
	if n := changes(time.Second); n < 3 {
		t.Errorf("with a 800ms TTL kept: %d changes in 1s, want several", n)
	}
	fast()
	fast() // twice is safe and releases once: the slow Keep still holds
	if n := changes(time.Second); n < 3 {
		t.Errorf("one Keep of two released: %d changes in 1s, want several", n)
	}
	slow()
	time.Sleep(300 * time.Millisecond) // a write in flight lands
	if n := changes(time.Second); n != 0 {
		t.Errorf("all released: %d changes in 1s, want none", n)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}
	if _, err := Keep(dir, 0); err == nil {
		t.Error("Keep with a zero TTL was accepted")
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
