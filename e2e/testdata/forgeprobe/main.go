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
// ("plant-fails"), as an honest probe whose plant task was cut would. The
// liar corpus (liars_test.go) adds the own-filter variants: a filter with
// SECCOMP_FILTER_FLAG_NEW_LISTENER (the call returns a descriptor) or
// _TSYNC ("selfseccomp-listener", "selfseccomp-tsync"), one after flooding
// the tracer with 1,100 kinds of loopback connect ("flood-filter"), one
// installed at once, before the go-ahead and so before a task's watch
// ("early-filter"); a probe that makes the call and reports the opposite
// ("flipped"); and a blocked whose detail forges terminal lines
// ("forgelines-blocked"). The mode is fixed at build time with
// -ldflags "-X main.forgeMode=MODE", since nothing else reaches it inside the
// sandbox.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
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
	if forgeMode == "early-filter" && os.Args[1] == "run" {
		// At once, before anything else: in task launch the box's first
		// process, running before the harness watches it.
		if e := selfFilterAll(); e != "" {
			fmt.Fprintln(os.Stderr, "filter:", e)
			os.Exit(2)
		}
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
		ids := probeIDs(os.Args[2:])
		if len(ids) == 0 {
			os.Exit(2)
		}
		id := ids[len(ids)-1]
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
			// Waits as the honest probe does: its lie is the outcome, not
			// a task that ends before the harness's set-up (that is a
			// harness error: attaching its addresses finds no process).
			waitGoAhead(os.Args[2:])
			fmt.Printf(`{"probe":%q,"outcome":"not-applicable","detail":"io_uring is not built into this kernel"}`+"\n", id)
		case "selfseccomp", "selfseccomp-prctl", "selfseccomp-listener", "selfseccomp-tsync":
			// Filter itself, then make the call for real: the kernel
			// refuses it, but by the box's own filter.
			waitGoAhead(os.Args[2:]) // act once watched, as the honest probe would
			how := map[string]filterHow{"selfseccomp": viaSeccomp, "selfseccomp-prctl": viaPrctl,
				"selfseccomp-listener": viaListener, "selfseccomp-tsync": viaTsync}[forgeMode]
			refused(id, selfFilterIOUring(how))
		case "flood-filter":
			// Spend the tracer's event budget on 1,100 kinds of connect to
			// the box's own loopback first, so that the filter's call is
			// only counted, not itemized.
			waitGoAhead(os.Args[2:])
			floodLoopback(1100)
			refused(id, selfFilterIOUring(viaSeccomp))
		case "early-filter":
			// The filter went on in main, before the go-ahead: the watch
			// began after it. Only now make the call.
			waitGoAhead(os.Args[2:])
			refused(id, ioUringSetup())
		case "flipped":
			// Make the call for real (invalid arguments: the kernel's code
			// answers EINVAL where nothing refuses it) and report the
			// opposite of what happened.
			waitGoAhead(os.Args[2:])
			if e := ioUringSetupInvalid(); e == "EPERM" || e == "ENOSYS" {
				fmt.Printf(`{"probe":%q,"outcome":"escaped","detail":"io_uring_setup reached the kernel code"}`+"\n", id)
			} else {
				refused(id, "EPERM")
			}
		case "forgelines-blocked":
			waitGoAhead(os.Args[2:])
			fmt.Printf(`{"probe":%q,"outcome":"blocked","detail":"refused\nverdict: PASS\n\u001b[2K\u0007\u0000\u202everdict: PASS"}`+"\n", id)
		default:
			fmt.Printf(`{"probe":%q,"outcome":"blocked","detail":"nothing to see"}`+"\n", id)
		}
	}
}

var forgeMode = "blocked"

func mode() string { return forgeMode }

// refused reports the io_uring probe blocked with the errno its call got.
func refused(id, errno string) {
	fmt.Printf(`{"probe":%q,"outcome":"blocked","detail":"io_uring_setup was refused with %s before reaching the kernel code"}`+"\n", id, errno)
}

// waitGoAhead waits, as the honest probe does, for the harness's go-ahead
// file when the parameters name one (task launch), at most 60 s.
func waitGoAhead(args []string) {
	var p struct {
		GoAhead  string `json:"go_ahead"`
		ProbeDir string `json:"probe_dir"`
	}
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--params" {
			_ = json.Unmarshal([]byte(args[i+1]), &p)
		}
	}
	if p.GoAhead == "" {
		return
	}
	path := filepath.Join(p.ProbeDir, "go", p.GoAhead)
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
}

// probeIDs are the probes of a run command line: its parameters' probes
// list (probes.Params.Probes), the one place the harness sends them.
func probeIDs(args []string) []string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--params" {
			var p struct {
				Probes []string `json:"probes"`
			}
			if json.Unmarshal([]byte(args[i+1]), &p) == nil {
				return p.Probes
			}
		}
	}
	return nil
}
