package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/moby/api/types/container"
)

func TestFindResidueRefusesBeforeCloseAndLooseTokens(t *testing.T) {
	s := &Sandbox{id: "x"}
	if _, err := s.FindResidue(context.Background(), "sc0123456789ab", []string{"scratch"}); !errors.Is(err, errNotClosed) {
		t.Errorf("before Close: %v, want errNotClosed", err)
	}
	s.closeRan = true
	for _, tok := range []string{"", "sc01", "../etc", "sc0123456789AB", "a b c d e f g h"} {
		if _, err := s.FindResidue(context.Background(), tok, []string{"scratch"}); err == nil {
			t.Errorf("token %q accepted", tok)
		}
	}
	if _, err := s.FindResidue(context.Background(), "sc0123456789ab", []string{"bogus"}); err == nil {
		t.Error("unknown kind accepted")
	}
}

func TestWritableHostDirs(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "engine.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got := writableHostDirs([]container.MountPoint{
		{Type: "bind", Source: dir, RW: true},
		{Type: "bind", Source: sock, RW: true},                     // not a folder
		{Type: "bind", Source: dir + "/missing", RW: true},         // gone
		{Type: "volume", Source: dir, RW: false},                   // read-only
		{Type: "tmpfs", Source: "", Destination: "/tmp", RW: true}, // the box's own
	})
	if len(got) != 1 || got[0] != dir {
		t.Errorf("writableHostDirs = %v, want [%s]", got, dir)
	}
}

func TestProcessesWithTokenFindsOnlyTheToken(t *testing.T) {
	// This process is left out of the scan; nothing else carries a token
	// made up here.
	got, err := processesWithToken("sczzzznotatoken")
	if err != nil || len(got) != 0 {
		t.Errorf("processesWithToken = %v, %v", got, err)
	}
}
