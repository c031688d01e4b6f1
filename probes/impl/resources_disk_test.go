package impl

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// fillOne writes the whole bound and removes its file.
func TestFillOneRemovesItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fill")
	chunk := make([]byte, diskChunk)
	mib, _, err := fillOne(context.Background(), path, chunk)
	if err != nil || mib != diskBoundMiB {
		t.Fatalf("fillOne: %d MiB, %v", mib, err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("fill file left behind: %v", err)
	}
}

// A cancelled context stops the filler before the bound, and it still
// removes its file.
func TestFillOneHonoursContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fill")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if mib, _, err := fillOne(ctx, path, make([]byte, diskChunk)); err == nil || mib != 0 {
		t.Fatalf("cancelled fillOne: %d MiB, %v", mib, err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("fill file left behind: %v", err)
	}
}
