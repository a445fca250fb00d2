package delta

import (
	"fmt"
	"strconv"
	"strings"
)

// SnapshotQuery reads the snapshot of the statement it is part of: select it beside the counts
// (in the same statement, or the same REPEATABLE READ transaction) and hand it to NewCounter.
const SnapshotQuery = `pg_current_snapshot()::text`

// Snapshot is which transactions a statement saw (pg_current_snapshot()): those that ended
// before Xmin, and those before Xmax that are not in Xip (still running then).
type Snapshot struct {
	Xmin, Xmax uint64
	Xip        []uint64
}

// ParseSnapshot reads pg_current_snapshot()'s text, "xmin:xmax:xip,xip".
func ParseSnapshot(s string) (*Snapshot, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("parse snapshot %q: want xmin:xmax:xip", s)
	}
	var snap Snapshot
	var err error
	if snap.Xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return nil, fmt.Errorf("parse snapshot %q: %w", s, err)
	}
	if snap.Xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return nil, fmt.Errorf("parse snapshot %q: %w", s, err)
	}
	if parts[2] != "" {
		for _, x := range strings.Split(parts[2], ",") {
			xid, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("parse snapshot %q: %w", s, err)
			}
			snap.Xip = append(snap.Xip, xid)
		}
	}
	if snap.Xmin > snap.Xmax {
		return nil, fmt.Errorf("parse snapshot %q: xmin after xmax", s)
	}
	return &snap, nil
}

// Sees says whether a transaction that committed (one the stream delivered) is visible in the
// snapshot. xid is the stream's 32-bit id; it is placed in the epoch that brings it nearest to
// Xmax, as the transactions compared are recent.
func (s *Snapshot) Sees(xid uint32) bool {
	full := s.Xmax&^0xFFFFFFFF | uint64(xid)
	switch {
	case full > s.Xmax && full-s.Xmax > 1<<31 && full >= 1<<32:
		full -= 1 << 32
	case full < s.Xmax && s.Xmax-full > 1<<31:
		full += 1 << 32
	}
	if full < s.Xmin {
		return true
	}
	if full >= s.Xmax {
		return false
	}
	for _, x := range s.Xip {
		if x == full {
			return false
		}
	}
	return true
}
