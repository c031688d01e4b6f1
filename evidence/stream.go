package evidence

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Stream appends events to a JSON-lines file as they happen, one write per
// event, so a crash loses nothing already seen.
type Stream struct {
	mu sync.Mutex
	f  *os.File
	w  io.Writer
}

// Event is one line of the stream.
type Event struct {
	Time time.Time `json:"time"`
	Type string    `json:"type"`
	Data any       `json:"data"`
}

// OpenStream creates (or truncates) path and returns a stream writing to it.
func OpenStream(path string) (*Stream, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating evidence folder: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening evidence stream: %w", err)
	}
	return &Stream{f: f, w: f}, nil
}

// Emit writes one event. A nil stream discards.
func (s *Stream) Emit(typ string, data any) error {
	if s == nil {
		return nil
	}
	b, err := json.Marshal(Event{Time: time.Now().UTC(), Type: typ, Data: data})
	if err != nil {
		return fmt.Errorf("encoding %s event: %w", typ, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return fmt.Errorf("writing %s event: stream closed", typ)
	}
	if _, err := s.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing %s event: %w", typ, err)
	}
	return nil
}

// Close flushes and closes the file; safe twice.
func (s *Stream) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f, s.w = nil, nil
	return err
}

// WriteFile writes v as indented JSON to path atomically (temp file, rename).
func WriteFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", filepath.Base(path), err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
