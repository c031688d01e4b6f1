package owner

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

func TestAlive(t *testing.T) {
	if alive, known := Alive(Self()); !alive || !known {
		t.Errorf("this process: alive %v known %v", alive, known)
	}
	if alive, known := Alive(BootID() + "/999999999/1"); alive || !known {
		t.Errorf("no such pid: alive %v known %v", alive, known)
	}
	// A pid reused by another process: same pid, other start time.
	if alive, _ := Alive(BootID() + "/" + strconv.Itoa(os.Getpid()) + "/1"); alive {
		t.Error("a reused pid counts as the owner")
	}
	if alive, known := Alive("other-boot/1/1"); alive || !known {
		t.Errorf("another boot: alive %v known %v", alive, known)
	}
	if _, known := Alive("junk"); known {
		t.Error("junk owner is known")
	}
}

// TestAliveZombie: a process that exited but that its parent has not
// reaped yet is dead, though /proc still shows its pid and start time (a
// reaper sees its run's pipe close at that moment).
func TestAliveZombie(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	who := BootID() + "/" + strconv.Itoa(pid) + "/" + startTicks(pid)
	defer cmd.Wait()
	// Bounded wait for the child to exit without reaping it.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st, _ := stat(pid); st == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child did not become a zombie within 5s")
		}
	}
	if _, ticks := stat(pid); ticks == "" {
		t.Fatal("the zombie's start time is gone from /proc: the case under test does not arise")
	}
	if alive, known := Alive(who); alive || !known {
		t.Errorf("an unreaped exited process: alive %v known %v, want dead", alive, known)
	}
}
