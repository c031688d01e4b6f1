package provenance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is an OCI registry (go-containerregistry's, blobs in memory)
// served over plain HTTP on a loopback address. The Docker engine accepts
// loopback registries without TLS.
type Registry struct {
	// Addr is host:port, e.g. 127.0.0.1:40123.
	Addr string
	srv  *http.Server
	done chan error

	closeOnce sync.Once
	closeErr  error
}

// ServeRegistry serves a new, empty registry on addr ("127.0.0.1:0" picks a
// free port). Only loopback addresses are accepted: sandcheck's registry is
// for this machine. Logs go to logw (nil discards them).
func ServeRegistry(addr string, logw io.Writer) (*Registry, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("serving registry on %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("serving registry on %q: only a loopback IP address is allowed", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serving registry: %w", err)
	}
	if logw == nil {
		logw = io.Discard
	}
	h := registry.New(registry.Logger(log.New(logw, "registry: ", log.LstdFlags)))
	r := &Registry{
		Addr: ln.Addr().String(),
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		done: make(chan error, 1),
	}
	go func() { r.done <- r.srv.Serve(ln) }()
	return r, nil
}

// Close stops the registry; its content is gone. Closing twice is a no-op.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := r.srv.Shutdown(ctx)
		if serr := r.served(); serr != nil && err == nil {
			err = serr
		}
		if err != nil {
			r.closeErr = fmt.Errorf("stopping registry: %w", err)
		}
	})
	return r.closeErr
}

// served waits for Serve to return; a server closed on purpose is no error.
func (r *Registry) served() error {
	err := <-r.done
	r.done <- err
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Wait blocks until the registry stops or ctx ends.
func (r *Registry) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return r.Close()
	case err := <-r.done:
		r.done <- err
		return r.served()
	}
}
