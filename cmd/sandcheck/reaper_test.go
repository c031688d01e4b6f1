package main

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/internal/owner"
)

// TestRunDied: a run that says it is done is left alone; a pipe closed
// without it is a death once the run's process is gone, and never while
// it lives (its things are a live run's).
func TestRunDied(t *testing.T) {
	dead := deadOwner(t)
	for _, c := range []struct {
		name, write, who string
		want             bool
	}{
		{"done", reaperDone + "\n", dead, false},
		{"closed, process gone", "", dead, true},
		{"closed, garbage, process gone", "partial", dead, true},
		{"closed, process alive", "", owner.Self(), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			_, _ = w.WriteString(c.write)
			w.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			if got := runDied(ctx, r, c.who); got != c.want {
				t.Errorf("runDied = %v, want %v", got, c.want)
			}
		})
	}
}

// deadOwner is the owner string of a process that has exited.
func deadOwner(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return owner.BootID() + "/" + strconv.Itoa(cmd.Process.Pid) + "/1"
}

func TestReaperLife(t *testing.T) {
	if got := reaperLife(30 * time.Minute); got != 35*time.Minute {
		t.Errorf("reaperLife(30m) = %s", got)
	}
	if got := reaperLife(10 * time.Hour); got != reaperMaxLife {
		t.Errorf("reaperLife(10h) = %s, want the bound %s", got, reaperMaxLife)
	}
}
