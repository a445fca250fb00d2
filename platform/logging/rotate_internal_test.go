package logging

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A file never grows past maxSize bytes (lumberjack's own unit is a megabyte), a file left by
// the last run counts, old files beyond maxBackups go, and a line larger than a file is refused.
func TestRotatingFileBytes(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "service.log")
	if err := os.WriteFile(name, bytes.Repeat([]byte("x"), 90), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := newRotatingFile(name, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte("0123456789012345678901234567890123456789\n") // 41 bytes
	for range 10 {
		if _, err := f.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Write(bytes.Repeat([]byte("y"), 101)); err == nil {
		t.Error("a write larger than the file was taken")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 2*len(line) {
		t.Errorf("current file has %d bytes, want %d (two lines after the last rotation)", len(b), 2*len(line))
	}
	// lumberjack removes old files in the background.
	deadline := 200
	for ; deadline > 0; deadline-- {
		entries, _ := os.ReadDir(dir)
		if len(entries) == 3 {
			break
		}
		if deadline == 1 {
			t.Fatalf("%d files, want 3 (current + 2 backups)", len(entries))
		}
		waitABit()
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		info, _ := e.Info()
		if info.Size() > 100 {
			t.Errorf("%s has %d bytes, want <= 100", e.Name(), info.Size())
		}
	}
}

func waitABit() { <-time.After(10 * time.Millisecond) }
