// Package lease ties a sandbox's idle holder to the life of the run that
// made it. While the run's process lives it rewrites a small file in the
// sandbox's probe folder (probes.LeaseFile, read-only inside the box) every
// TTL/8; the holder (sandcheck-probe hold --lease FILE --lease-ttl TTL)
// reads it and exits once its content has not changed for TTL. A run that
// dies (SIGKILL, a cgroup kill, a container kill that takes its reaper too)
// stops rewriting it, so its sandboxes end within minutes instead of the
// hours a fixed deadline gave them, and a live run keeps them however long
// it runs.
//
// It is a backstop, not the boundary: a hostile box may stop its own
// holder early (which only ends the box) or keep it from exiting (with
// ptrace, say); the run's reaper and every later run's sweep remove the
// sandboxes of a dead run from the host side whatever the holder does.
package lease

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// TTL is how long a holder waits for its lease to change before it ends:
// minutes, far above the renewal interval (TTL/8) so a busy or starved
// harness never misses it, and far below the 2 h deadline sandboxes had.
const TTL = 3 * time.Minute

// minEvery bounds how often a lease is rewritten, whatever its TTL.
const minEvery = 100 * time.Millisecond

// HolderArgs are the hold arguments that tie a holder to the lease of the
// probe folder mounted at probes.ProbeMount, with lifetime ttl.
func HolderArgs(ttl time.Duration) []string {
	return []string{"--lease", probes.ProbeMount + "/" + probes.LeaseFile, "--lease-ttl", ttl.String()}
}

var (
	mu      sync.Mutex
	keepers = map[string]*keeper{} // by probe folder
)

// keeper rewrites one folder's lease for every Keep not yet released.
type keeper struct {
	path  string
	users int
	every time.Duration
	reset chan time.Duration
	stop  chan struct{}
}

// Keep writes the lease of the probe folder dir now and rewrites it every
// ttl/8 until the returned release has been called as many times as Keep
// was for dir. Call it before starting a holder with HolderArgs(ttl).
// Release is safe to call more than once.
func Keep(dir string, ttl time.Duration) (release func(), err error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("lease of %s: a lifetime of %s", dir, ttl)
	}
	every := max(ttl/8, minEvery)
	path := filepath.Join(dir, probes.LeaseFile)
	if err := write(path); err != nil {
		return nil, err
	}
	mu.Lock()
	k := keepers[dir]
	if k == nil {
		k = &keeper{path: path, every: every, reset: make(chan time.Duration, 1),
			stop: make(chan struct{})}
		keepers[dir] = k
		go k.run()
	} else if every < k.every {
		k.every = every
		select { // only the latest interval matters
		case <-k.reset:
		default:
		}
		k.reset <- every
	}
	k.users++
	mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			if k.users--; k.users == 0 {
				delete(keepers, dir)
				close(k.stop)
			}
		})
	}, nil
}

func (k *keeper) run() {
	t := time.NewTicker(k.every)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case d := <-k.reset:
			t.Reset(d)
		case <-t.C:
			// A failed write (the folder removed under a live sandbox)
			// only lets the holder end, which is what a lost folder means.
			_ = write(k.path)
		}
	}
}

// seq makes every write's content new even within one clock tick.
var seq struct {
	sync.Mutex
	n uint64
}

// write replaces the lease file with new content by a rename, so a holder
// never reads it half written.
func write(path string) error {
	seq.Lock()
	seq.n++
	n := seq.n
	seq.Unlock()
	tmp := fmt.Sprintf("%s.%d.%d.tmp", path, os.Getpid(), n)
	b := []byte(strconv.FormatInt(time.Now().UnixNano(), 10) + " " + strconv.FormatUint(n, 10) + "\n")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing the lease %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing the lease %s: %w", path, err)
	}
	return nil
}
