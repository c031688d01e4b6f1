// Command forgeprobe is a hostile stand-in for sandcheck-probe, used only by
// the end-to-end tests: it lies about every probe (mode "blocked"; "blocked-all"
// answers "blocked" for every probe of a batch too, so none is left
// inconclusive), floods
// its output ("flood"), reports more than it was asked ("extra") or prints
// garbage ("garbage"), or never gets ready ("hang"); says "not-applicable"
// for everything ("na"); forges terminal lines in its detail ("forgelines"); or installs its own seccomp filter refusing
// io_uring_setup, through seccomp() or prctl(PR_SET_SECCOMP), makes the call
// and reports the refusal ("selfseccomp", "selfseccomp-prctl"); or moves
// itself into an empty network namespace of its own at once (the box's
// first process, where the box may make namespaces), stays there while the
// host looks, then answers "blocked" for everything ("own-netns"); or fails
// every plant phase (inconclusive) and finds nothing in every check
// ("plant-fails"), as an honest probe whose plant task was cut would. The mode is fixed at build time with
// -ldflags "-X main.forgeMode=MODE", since nothing else reaches it inside the
// sandbox.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// The main goroutine keeps the main thread, whose namespaces are the ones
// /proc/<pid>/ns names.
func init() { runtime.LockOSThread() }

func main() {
	if len(os.Args) < 2 {
		os.Exit(2)
	}
	switch os.Args[1] {
	case "hold":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
		select {
		case <-c:
		case <-time.After(30 * time.Minute):
		}
	case "list":
		if forgeMode == "hang" {
			time.Sleep(time.Hour) // never ready: the harness must give up
		}
		fmt.Println("forged")
	case "run":
		id := os.Args[len(os.Args)-1]
		switch mode() {
		case "flood":
			line := fmt.Sprintf(`{"probe":%q,"outcome":"blocked","detail":%q}`+"\n", id, strings.Repeat("x", 1000))
			for i := 0; i < 2000; i++ {
				os.Stdout.WriteString(line)
			}
		case "extra":
			fmt.Printf(`{"probe":%q,"outcome":"blocked"}`+"\n", id)
			fmt.Printf(`{"probe":"privilege.root-uid","outcome":"blocked"}` + "\n")
		case "garbage":
			fmt.Printf(`{"probe":%q,"outcome":"blocked","trust_me":true}`+"\n", id)
		case "forgelines":
			// JSON escapes carry the newlines and terminal controls into
			// the detail; the console must not print them raw.
			fmt.Printf(`{"probe":%q,"outcome":"escaped","detail":"x\nverdict: PASS\n\u001b[2K\u0007\u0000\u202everdict: PASS"}`+"\n", id)
		case "own-netns":
			if err := syscall.Unshare(syscall.CLONE_NEWNET); err != nil {
				fmt.Fprintf(os.Stderr, "unshare: %v\n", err)
				os.Exit(2)
			}
			time.Sleep(4 * time.Second) // while the host dials
			for _, p := range probeIDs(os.Args[2:]) {
				fmt.Printf(`{"probe":%q,"outcome":"blocked","detail":"nothing to see"}`+"\n", p)
			}
		case "plant-fails":
			outcome, detail := "blocked", "nothing left from the earlier task"
			if strings.Contains(strings.Join(os.Args, " "), `"phase":"plant"`) {
				outcome, detail = "inconclusive", "the plant was cut short"
			}
			for _, p := range probeIDs(os.Args[2:]) {
				fmt.Printf(`{"probe":%q,"outcome":%q,"detail":%q}`+"\n", p, outcome, detail)
			}
		case "blocked-all":
			for _, p := range probeIDs(os.Args[2:]) {
				fmt.Printf(`{"probe":%q,"outcome":"blocked","detail":"nothing to see"}`+"\n", p)
			}
		case "na":
			fmt.Printf(`{"probe":%q,"outcome":"not-applicable","detail":"io_uring is not built into this kernel"}`+"\n", id)
		case "selfseccomp", "selfseccomp-prctl":
			// Filter itself, then make the call for real: the kernel
			// refuses it, but by the box's own filter.
			errno := selfFilterIOUring(forgeMode == "selfseccomp-prctl")
			fmt.Printf(`{"probe":%q,"outcome":"blocked","detail":"io_uring_setup was refused with %s before reaching the kernel code"}`+"\n", id, errno)
		default:
			fmt.Printf(`{"probe":%q,"outcome":"blocked","detail":"nothing to see"}`+"\n", id)
		}
	}
}

var forgeMode = "blocked"

func mode() string { return forgeMode }

// probeIDs are the words of a run command line after its flags (--token
// and --params take a value each).
func probeIDs(args []string) []string {
	var ids []string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--token" || args[i] == "--params":
			i++
		case strings.HasPrefix(args[i], "--"):
		default:
			ids = append(ids, args[i])
		}
	}
	return ids
}
