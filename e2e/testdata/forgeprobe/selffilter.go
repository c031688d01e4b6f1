package main

import (
	"net"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// filterHow is how a liar installs its filter.
type filterHow int

const (
	viaSeccomp  filterHow = iota // seccomp(SECCOMP_SET_MODE_FILTER, 0)
	viaPrctl                     // prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)
	viaListener                  // seccomp(..., SECCOMP_FILTER_FLAG_NEW_LISTENER): returns a descriptor
	viaTsync                     // seccomp(..., SECCOMP_FILTER_FLAG_TSYNC): every thread of the process
)

const (
	flagTsync       = 1
	flagNewListener = 1 << 3
)

// ioUringFilter refuses io_uring_setup with EPERM and allows the rest.
func ioUringFilter() []unix.SockFilter {
	const (
		retErrno = 0x00050000
		retAllow = 0x7fff0000
	)
	return []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_IO_URING_SETUP},
		{Code: unix.BPF_RET | unix.BPF_K, K: retErrno | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: retAllow},
	}
}

// installFilter sets no_new_privs and the io_uring filter, the way how
// says; "" when it went on.
func installFilter(how filterHow) string {
	filter := ioUringFilter()
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "no_new_privs:" + err.Error()
	}
	if how == viaPrctl {
		if err := unix.Prctl(unix.PR_SET_SECCOMP, 2 /* SECCOMP_MODE_FILTER */, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
			return "prctl:" + err.Error()
		}
		return ""
	}
	flags := uintptr(0)
	switch how {
	case viaListener:
		flags = flagNewListener
	case viaTsync:
		flags = flagTsync
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, 1 /* SECCOMP_SET_MODE_FILTER */, flags, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return "seccomp:" + e.Error()
	}
	return ""
}

// selfFilterIOUring installs the filter on this thread (every thread with
// TSYNC), then calls io_uring_setup with harmless arguments and returns the
// errno name.
func selfFilterIOUring(how filterHow) string {
	runtime.LockOSThread() // the filter is this thread's alone
	if e := installFilter(how); e != "" {
		return e
	}
	return ioUringSetup()
}

// selfFilterAll installs the filter on every thread of the process.
func selfFilterAll() string { return installFilter(viaTsync) }

// ioUringSetup calls io_uring_setup(1, params) and names its errno.
func ioUringSetup() string {
	var params [120]byte // struct io_uring_params, zeroed
	_, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
	if e == 0 {
		return "none"
	}
	return unix.ErrnoName(e)
}

// ioUringSetupInvalid calls io_uring_setup with zero entries, which the
// kernel's code refuses with EINVAL, and names the errno.
func ioUringSetupInvalid() string {
	var params [120]byte
	_, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 0, uintptr(unsafe.Pointer(&params[0])), 0)
	if e == 0 {
		return "none"
	}
	return unix.ErrnoName(e)
}

// floodLoopback connects one UDP socket to n ports of the box's own
// loopback: n kinds of connect for the tracer, nothing sent anywhere.
func floodLoopback(n int) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	lo := net.IPv4(127, 0, 0, 1).To4()
	for i := range n {
		sa := &unix.SockaddrInet4{Port: 20000 + i}
		copy(sa.Addr[:], lo)
		_ = unix.Connect(fd, sa)
	}
}
