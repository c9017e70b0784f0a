package config

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"gatehouse/internal/provider"
)

// Watcher reloads a config file when it changes or when Trigger is called.
//
// It watches the file's directory rather than the file, because editors
// and Kubernetes replace files instead of writing them: an editor writes a
// temporary file and renames it over the old one; a ConfigMap volume swaps
// the "..data" symlink to a new directory. Bursts of events are debounced
// into one reload, and a file-event reload whose content is unchanged since
// the last attempt is skipped.
//
// As soon as it is watching, Run checks the file once, so a change made
// between the caller's Load and the start of the watch is not missed. Call
// SetCurrent with the config from Load to make that check quiet when the
// file is unchanged; without it the check always calls onLoad once.
//
// onLoad gets each new valid config; onError gets each failure to read or
// parse (the caller keeps running the config it has). Both are called from
// the goroutine running Run, one at a time.
type Watcher struct {
	// Debounce is how long the directory must be quiet before a reload.
	// Zero means DefaultDebounce.
	Debounce time.Duration

	path    string
	types   *provider.Registry // what Parse validates provider types against
	onLoad  func(*Config)
	onError func(error)

	once    sync.Once
	trigger chan struct{}
	current *Config
	ready   func() // test hook: called once the directory is watched and checked
}

// NewWatcher returns a Watcher for the file at path. Start it with Run.
func NewWatcher(path string, types *provider.Registry, onLoad func(*Config), onError func(error)) *Watcher {
	return &Watcher{path: path, types: types, onLoad: onLoad, onError: onError}
}

// Watch sets the file and callbacks, then runs like Run. It lets a zero
// Watcher be used directly.
func (w *Watcher) Watch(ctx context.Context, path string, onLoad func(*Config), onError func(error)) error {
	w.path, w.onLoad, w.onError = path, onLoad, onError
	return w.Run(ctx)
}

// SetCurrent tells w which config the caller is running (the one from
// Load), so Run's first check reloads only if the file has changed since.
// Call it before Run.
func (w *Watcher) SetCurrent(cfg *Config) { w.current = cfg }

// Trigger asks for a reload now, skipping the debounce and the unchanged
// content check (for SIGHUP). It never blocks; triggers that arrive while
// one is pending merge into it, and one made before Run starts is served
// when it does.
func (w *Watcher) Trigger() {
	select {
	case w.triggers() <- struct{}{}:
	default:
	}
}

func (w *Watcher) triggers() chan struct{} {
	w.once.Do(func() { w.trigger = make(chan struct{}, 1) })
	return w.trigger
}

// Run watches until ctx is done, then returns nil. It returns an error only
// if the watch cannot be set up or breaks.
func (w *Watcher) Run(ctx context.Context) error {
	abs, err := filepath.Abs(w.path)
	if err != nil {
		return fmt.Errorf("config watch: %w", err)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("config watch: %w", err)
	}
	defer fw.Close()
	if err := fw.Add(filepath.Dir(abs)); err != nil {
		return fmt.Errorf("config watch %s: %w", filepath.Dir(abs), err)
	}
	debounce := w.Debounce
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()

	st := &reloadState{abs: abs}
	st.target, _ = filepath.EvalSymlinks(abs)
	if c := w.current; c != nil && c.hasSource {
		st.sum, st.hasSum = c.source, true
	}
	w.reload(st, false)
	if w.ready != nil {
		w.ready()
	}
	trigger := w.triggers()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return errors.New("config watch: event stream closed")
			}
			if st.relevant(ev) {
				timer.Reset(debounce)
			}
		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("config watch: error stream closed")
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				timer.Reset(debounce) // events were lost: look again
				continue
			}
			w.onError(fmt.Errorf("config watch: %w", err))
		case <-timer.C:
			w.reload(st, false)
		case <-trigger:
			timer.Stop()
			w.reload(st, true)
		}
	}
}

// reloadState is what Run remembers between events.
type reloadState struct {
	abs    string   // the config path, absolute
	target string   // where abs pointed after following symlinks
	sum    [32]byte // content of the last reload attempt
	hasSum bool
}

// relevant reports whether ev may have changed the config: an event on the
// file itself or on Kubernetes' "..data" link, or any event after which the
// path resolves somewhere else (some other symlink swap).
func (st *reloadState) relevant(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	name := filepath.Base(ev.Name)
	changed := false
	if target, err := filepath.EvalSymlinks(st.abs); err == nil && target != st.target {
		st.target, changed = target, true
	}
	return changed || name == filepath.Base(st.abs) || name == "..data"
}

func (w *Watcher) reload(st *reloadState, force bool) {
	data, err := os.ReadFile(st.abs)
	if err != nil {
		st.hasSum = false // so the file coming back reloads
		w.onError(fmt.Errorf("read config: %w", err))
		return
	}
	sum := sha256.Sum256(data)
	if !force && st.hasSum && sum == st.sum {
		return
	}
	st.sum, st.hasSum = sum, true
	cfg, err := Parse(data, w.path, w.types)
	if err != nil {
		w.onError(err)
		return
	}
	w.onLoad(cfg)
}
