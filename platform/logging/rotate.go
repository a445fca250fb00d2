package logging

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"gopkg.in/natefinch/lumberjack.v2"
)

// megabyte is lumberjack's unit of size.
const megabyte = 1 << 20

// rotatingFile is a log file that rotates before it would grow past maxSize bytes, keeping
// maxBackups old files. lumberjack v2 (the maintained release) counts MaxSize in whole
// megabytes, while LOG__FILE__MAX_SIZE is in bytes as the specification says; so this type
// counts the bytes itself and asks lumberjack to rotate, and sets lumberjack's own limit above
// maxSize so that it never rotates on its own. lumberjack still names, removes and writes the
// files.
type rotatingFile struct {
	mu      sync.Mutex
	log     *lumberjack.Logger
	maxSize int64
	size    int64 // bytes in the current file
}

func newRotatingFile(name string, maxSize int64, maxBackups int) (*rotatingFile, error) {
	if maxSize <= 0 {
		return nil, fmt.Errorf("open log file: max size %d is not positive", maxSize)
	}
	f := &rotatingFile{
		log: &lumberjack.Logger{
			Filename:   name,
			MaxSize:    int(maxSize/megabyte) + 2,
			MaxBackups: maxBackups,
		},
		maxSize: maxSize,
	}
	// lumberjack appends to a file left by the last run: count what it holds.
	if info, err := os.Stat(name); err == nil {
		f.size = info.Size()
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open log file: %w", err)
	}
	return f, nil
}

// Write writes p to the current file, first rotating when p would take it past maxSize. A p
// larger than maxSize is refused, as lumberjack refuses a write larger than a file (the async
// writer cuts its writes to maxSize between lines).
func (f *rotatingFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if int64(len(p)) > f.maxSize {
		return 0, fmt.Errorf("write log: %d bytes exceed LOG__FILE__MAX_SIZE=%d", len(p), f.maxSize)
	}
	if f.size > 0 && f.size+int64(len(p)) > f.maxSize {
		if err := f.log.Rotate(); err != nil {
			return 0, fmt.Errorf("rotate log: %w", err)
		}
		f.size = 0
	}
	n, err := f.log.Write(p)
	f.size += int64(n)
	return n, err
}

// Close closes the current file.
func (f *rotatingFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.log.Close()
}
