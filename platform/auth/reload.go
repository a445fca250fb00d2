package auth

import (
	"crypto/sha256"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/time/rate"
)

// watcher reloads the keys file on SIGHUP and when its content changed, which it looks for every
// AUTHENTICATION__API_KEYS_POLL_INTERVAL (a second by default), until stop.
//
// The file is polled, not watched with inotify (fsnotify): keys files are commonly replaced
// rather than written in place, and the ways they are replaced defeat a watch on the file or
// on its folder. An editor or `mv` renames a new file over the old one (a watch on the file
// follows the old, deleted inode); a Kubernetes Secret or ConfigMap mount swaps a symlink two
// levels up (the events name "..data", never the file); network and some container file
// systems send no events at all. Reading a file of a few kilobytes once a second and comparing
// its SHA-256 with the last one costs microseconds and sees every one of these. The content's
// hash is compared, not the modification time: timestamps are only as fine as the kernel's
// clock tick, so two writes of the same size within one tick would look the same.
type watcher struct {
	c       *Checker
	hup     chan os.Signal
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once

	seen    [sha256.Size]byte // digest of the file's content last read
	seenBad bool              // that content did not parse
	lastErr string            // the last read error logged, so that it is not logged every second
}

// startWatcher starts watching. SIGHUP is caught even without a keys file (it says there is
// nothing to reload): its default action would end the service.
func startWatcher(c *Checker, seen [sha256.Size]byte) *watcher {
	w := &watcher{c: c, hup: make(chan os.Signal, 1), done: make(chan struct{}), stopped: make(chan struct{}), seen: seen}
	signal.Notify(w.hup, syscall.SIGHUP)
	go w.run()
	return w
}

func (w *watcher) stop() {
	w.once.Do(func() {
		close(w.done)
		<-w.stopped
	})
}

func (w *watcher) run() {
	defer close(w.stopped)
	defer signal.Stop(w.hup)
	var tick <-chan time.Time
	if w.c.file != "" && w.c.poll > 0 {
		t := time.NewTicker(w.c.poll)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-w.done:
			return
		case <-w.hup:
			w.reload("SIGHUP", true)
		case <-tick:
			w.reload("the file changed", false)
		}
	}
}

// reload reads the file and, when its content differs from what was read last (or always, when
// forced), puts its keys in force. A file that cannot be read or does not parse leaves the keys
// in force as they are, and the log says why.
func (w *watcher) reload(trigger string, force bool) {
	c := w.c
	if c.file == "" {
		c.log.Info("SIGHUP: nothing to reload (AUTHENTICATION__API_KEYS_FILE is not set)")
		return
	}
	inForce := len(c.keys.Load().keys)
	data, err := os.ReadFile(c.file)
	if err != nil {
		c.countReloadFailure("read")
		if msg := err.Error(); force || msg != w.lastErr {
			w.lastErr = msg
			c.reloadFailed("cannot read the file: " + msg)
			c.log.Error("API keys file cannot be read; the keys in force stay", "file", c.file, "trigger", trigger,
				"error", msg, "keys_in_force", inForce)
		}
		return
	}
	w.lastErr = ""
	d := sha256.Sum256(data)
	if d == w.seen && !force {
		if !w.seenBad {
			// Readable again after a read error, and what is in force: nothing failed now.
			c.reloadWorked()
		}
		return
	}
	w.seen = d
	keys, err := parseKeyFile(data)
	w.seenBad = err != nil
	if err != nil {
		c.countReloadFailure("invalid")
		c.reloadFailed("not valid: " + err.Error())
		c.log.Error("API keys file not reloaded: it is not valid; the keys in force stay", "file", c.file, "trigger", trigger,
			"error", err.Error(), "keys_in_force", inForce)
		return
	}
	old := c.keys.Load()
	set := c.build(keys, old)
	c.keys.Store(set)
	c.reloadWorked()
	added, removed, changed := diff(old, set)
	c.log.Info("API keys reloaded", "file", c.file, "trigger", trigger, "keys", set.fromFile,
		"added", added, "removed", removed, "changed", changed)
	if len(set.keys) == 0 {
		c.log.Warn("no API key in force: the keys file lists none and AUTHENTICATION__API_KEY is not set", "file", c.file)
	}
}

// load reads the keys file at start-up.
func (c *Checker) load() (*keySet, [sha256.Size]byte, error) {
	data, err := os.ReadFile(c.file)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	keys, err := parseKeyFile(data)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	return c.build(keys, nil), sha256.Sum256(data), nil
}

// build returns the set of the file's keys and AUTHENTICATION__API_KEY. A key with a rate keeps
// the limiter of the key of its name in old (adjusted to a new rate or burst), so that a reload
// neither resets a client's rate nor lets it start over with a full burst; and every key keeps
// the count of its requests in flight, which the requests running across the reload give back.
func (c *Checker) build(fileKeys []key, old *keySet) *keySet {
	set := &keySet{keys: make([]key, 0, len(fileKeys)+1), fromFile: len(fileKeys)}
	for _, k := range fileKeys {
		var prev *key
		if old != nil {
			prev = old.byName(k.name)
		}
		if prev != nil && prev.running != nil {
			k.running = prev.running
		} else {
			k.running = new(atomic.Int64)
		}
		if k.rate > 0 {
			if prev != nil && prev.limiter != nil {
				k.limiter = prev.limiter
				if prev.rate != k.rate {
					k.limiter.SetLimit(rate.Limit(k.rate))
				}
				if prev.burst != k.burst {
					k.limiter.SetBurst(k.burst)
				}
			} else {
				k.limiter = rate.NewLimiter(rate.Limit(k.rate), k.burst)
			}
		}
		set.keys = append(set.keys, k)
	}
	if c.fallback != nil {
		set.keys = append(set.keys, *c.fallback)
	}
	return set
}

// diff names the keys added, removed and changed (another key, scopes or rate) from old to set.
func diff(old, set *keySet) (added, removed, changed []string) {
	for _, k := range set.keys {
		switch prev := old.byName(k.name); {
		case prev == nil:
			added = append(added, k.name)
		case prev.digest != k.digest || prev.scopes != k.scopes || prev.rate != k.rate || prev.burst != k.burst || prev.maxInFlight != k.maxInFlight:
			changed = append(changed, k.name)
		}
	}
	for _, k := range old.keys {
		if set.byName(k.name) == nil {
			removed = append(removed, k.name)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	slices.Sort(changed)
	return added, removed, changed
}
