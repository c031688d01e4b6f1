package main

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// selfFilterIOUring sets no_new_privs and a seccomp filter on this thread
// that refuses io_uring_setup with EPERM (through prctl or seccomp), then
// calls io_uring_setup with harmless arguments and returns the errno name.
func selfFilterIOUring(viaPrctl bool) string {
	runtime.LockOSThread() // the filter is this thread's alone
	const (
		retErrno = 0x00050000
		retAllow = 0x7fff0000
	)
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_IO_URING_SETUP},
		{Code: unix.BPF_RET | unix.BPF_K, K: retErrno | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: retAllow},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "no_new_privs:" + err.Error()
	}
	if viaPrctl {
		if err := unix.Prctl(unix.PR_SET_SECCOMP, 2 /* SECCOMP_MODE_FILTER */, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
			return "prctl:" + err.Error()
		}
	} else if _, _, e := unix.Syscall(unix.SYS_SECCOMP, 1 /* SECCOMP_SET_MODE_FILTER */, 0, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return "seccomp:" + e.Error()
	}
	var params [120]byte // struct io_uring_params, zeroed
	_, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
	if e == 0 {
		return "none"
	}
	return unix.ErrnoName(e)
}
