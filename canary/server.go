package canary

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Bounds every canary server applies to the hostile clients it serves.
const (
	MaxHeaderBytes    = 8 << 10
	MaxBodyBytes      = 4 << 10
	MaxConns          = 128
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 10 * time.Second
	IdleTimeout       = 30 * time.Second
)

// Server is one canary HTTP listener.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	err  error // set by the serve goroutine before done closes

	closeOnce sync.Once
	closeErr  error
}

// Serve listens on addr (IPv4 host:port, or [IPv6]:port) and serves h with the canary
// bounds until Close. ctx bounds only the listen; the server's life ends with
// Close. Server errors are logged to logger, never printed.
func Serve(ctx context.Context, addr string, h http.Handler, logger *slog.Logger) (*Server, error) {
	return serve(ctx, addr, h, logger, nil)
}

// ServeTLS is Serve over TLS with cfg (HTTP/1.1).
func ServeTLS(ctx context.Context, addr string, h http.Handler, cfg *tls.Config, logger *slog.Logger) (*Server, error) {
	return serve(ctx, addr, h, logger, cfg)
}

func serve(ctx context.Context, addr string, h http.Handler, logger *slog.Logger, cfg *tls.Config) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, tcpNet(addr), addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	s := &Server{
		srv: &http.Server{
			Handler:           h,
			MaxHeaderBytes:    MaxHeaderBytes,
			ReadHeaderTimeout: ReadHeaderTimeout,
			ReadTimeout:       ReadTimeout,
			WriteTimeout:      WriteTimeout,
			IdleTimeout:       IdleTimeout,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		},
		ln:   &limitListener{Listener: ln, sem: make(chan struct{}, MaxConns)},
		done: make(chan struct{}),
	}
	if cfg != nil {
		s.ln = tls.NewListener(s.ln, cfg)
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("canary server stopped", "addr", addr, "err", err)
			s.err = err
		}
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server: it waits for requests in flight until ctx ends,
// then cuts the remaining connections. The listening socket is closed when
// Close returns. Calling it twice is safe.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		var errs []error
		if err := s.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shutting down canary server: %w", err))
			if err := s.srv.Close(); err != nil {
				errs = append(errs, fmt.Errorf("closing canary server: %w", err))
			}
		}
		<-s.done
		if s.err != nil {
			errs = append(errs, fmt.Errorf("serving canary: %w", s.err))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// limitListener refuses connections beyond its capacity by closing them at
// once, so a flood cannot pile up goroutines and sockets on the host.
type limitListener struct {
	net.Listener
	sem chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
		default:
			c.Close()
		}
	}
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
