package config

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

const testDebounce = 40 * time.Millisecond

// quiet is how long to wait to be sure no further callback comes.
const quiet = 8 * testDebounce

func version(n int) string { return "listen: 127.0.0.1:" + string(rune('0'+n)) + "000\n" }

type watched struct {
	w     *Watcher
	loads chan *Config
	errs  chan error
	done  chan error
}

// startWatcher runs a Watcher on path until the test ends, and waits
// until it is watching. current is the config the caller runs, or nil.
func startWatcher(t *testing.T, path string, current *Config) *watched {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ww := &watched{loads: make(chan *Config, 10), errs: make(chan error, 10), done: make(chan error, 1)}
	ww.w = NewWatcher(path, testTypes(), func(c *Config) { ww.loads <- c }, func(err error) { ww.errs <- err })
	ww.w.Debounce = testDebounce
	ww.w.SetCurrent(current)
	ready := make(chan struct{})
	ww.w.ready = func() { close(ready) }
	go func() { ww.done <- ww.w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ww.done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-ww.done:
		t.Fatalf("Run returned early: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("watcher not ready")
	}
	return ww
}

// expectLoad waits for exactly one onLoad with listen, and nothing else.
func (ww *watched) expectLoad(t *testing.T, listen string) {
	t.Helper()
	select {
	case c := <-ww.loads:
		if c.Listen != listen {
			t.Errorf("loaded listen %q, want %q", c.Listen, listen)
		}
	case err := <-ww.errs:
		t.Fatalf("onError(%v), want onLoad", err)
	case <-time.After(5 * time.Second):
		t.Fatal("no onLoad")
	}
	ww.expectNothing(t)
}

func (ww *watched) expectError(t *testing.T, substr string) {
	t.Helper()
	select {
	case err := <-ww.errs:
		if !strings.Contains(err.Error(), substr) {
			t.Errorf("onError(%v), want %q", err, substr)
		}
	case c := <-ww.loads:
		t.Fatalf("onLoad(%v), want onError", c.Listen)
	case <-time.After(5 * time.Second):
		t.Fatal("no onError")
	}
	ww.expectNothing(t)
}

func (ww *watched) expectNothing(t *testing.T) {
	t.Helper()
	select {
	case c := <-ww.loads:
		t.Errorf("unexpected extra onLoad(%v)", c.Listen)
	case err := <-ww.errs:
		t.Errorf("unexpected onError(%v)", err)
	case <-time.After(quiet):
	}
}

// load is what the caller of a Watcher does first.
func load(t *testing.T, path string) *Config {
	t.Helper()
	cfg, err := Load(path, testTypes())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWatcherWriteInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gatehouse.yaml")
	writeFile(t, path, version(1))
	ww := startWatcher(t, path, load(t, path))
	writeFile(t, path, version(2))
	ww.expectLoad(t, "127.0.0.1:2000")
	// Rewriting the same bytes (or touching the file) is not a change.
	writeFile(t, path, version(2))
	ww.expectNothing(t)
	writeFile(t, path, version(3))
	ww.expectLoad(t, "127.0.0.1:3000")
}

func TestWatcherRenameReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gatehouse.yaml")
	writeFile(t, path, version(1))
	ww := startWatcher(t, path, load(t, path))
	// What editors do: write a temporary file, then rename it over.
	tmp := filepath.Join(dir, ".gatehouse.yaml.swp")
	writeFile(t, tmp, version(2))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	ww.expectLoad(t, "127.0.0.1:2000")
	// A file unrelated to the config changing in the same directory is ignored.
	writeFile(t, filepath.Join(dir, "other.yaml"), "x")
	ww.expectNothing(t)
}

// A Kubernetes ConfigMap volume: config.yaml → ..data/config.yaml, and
// ..data → a timestamped directory that an update replaces atomically.
func TestWatcherKubernetesSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	mustDo := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustDo(os.Mkdir(filepath.Join(dir, "..2024_01_01"), 0o755))
	writeFile(t, filepath.Join(dir, "..2024_01_01", "config.yaml"), version(1))
	mustDo(os.Symlink("..2024_01_01", filepath.Join(dir, "..data")))
	mustDo(os.Symlink(filepath.Join("..data", "config.yaml"), filepath.Join(dir, "config.yaml")))
	ww := startWatcher(t, filepath.Join(dir, "config.yaml"), load(t, filepath.Join(dir, "config.yaml")))

	mustDo(os.Mkdir(filepath.Join(dir, "..2024_01_02"), 0o755))
	writeFile(t, filepath.Join(dir, "..2024_01_02", "config.yaml"), version(2))
	mustDo(os.Symlink("..2024_01_02", filepath.Join(dir, "..data_tmp")))
	mustDo(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	mustDo(os.RemoveAll(filepath.Join(dir, "..2024_01_01")))
	ww.expectLoad(t, "127.0.0.1:2000")
}

func TestWatcherInvalidFileKeepsOld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gatehouse.yaml")
	writeFile(t, path, version(1))
	ww := startWatcher(t, path, load(t, path))
	writeFile(t, path, "listen: 127.0.0.1:1000\nbogus: true\n")
	ww.expectError(t, `gatehouse.yaml:2:1: bogus: unknown field "bogus"`)
	// Fixed again: loads.
	writeFile(t, path, version(4))
	ww.expectLoad(t, "127.0.0.1:4000")
}

func TestWatcherRemovedAndRestored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gatehouse.yaml")
	writeFile(t, path, version(1))
	ww := startWatcher(t, path, load(t, path))
	writeFile(t, path, version(2))
	ww.expectLoad(t, "127.0.0.1:2000")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	ww.expectError(t, "no such file")
	// The same content as the last good load still loads: the caller was told of a failure.
	writeFile(t, path, version(2))
	ww.expectLoad(t, "127.0.0.1:2000")
}

func TestWatcherTrigger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gatehouse.yaml")
	writeFile(t, path, version(1))
	w := NewWatcher(path, testTypes(), nil, nil)
	loads := make(chan *Config, 10)
	w.onLoad = func(c *Config) { loads <- c }
	w.onError = func(err error) { t.Errorf("onError(%v)", err) }
	w.Debounce = time.Hour // only Trigger can reload
	w.SetCurrent(load(t, path))
	w.Trigger() // before Run: served when it starts
	w.Trigger() // merged with the pending one
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for i := range 2 { // unchanged content still reloads on Trigger
		select {
		case c := <-loads:
			if c.Listen != "127.0.0.1:1000" {
				t.Errorf("listen %q", c.Listen)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("trigger %d: no onLoad", i)
		}
		select {
		case <-loads:
			t.Fatal("one trigger gave two loads")
		case <-time.After(quiet):
		}
		w.Trigger()
	}
}

func TestWatcherZeroValueWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gatehouse.yaml")
	writeFile(t, path, version(1))
	var w Watcher
	w.Debounce = testDebounce
	ctx, cancel := context.WithCancel(context.Background())
	loads := make(chan *Config, 10)
	done := make(chan error, 1)
	go func() { done <- w.Watch(ctx, path, func(c *Config) { loads <- c }, func(err error) { t.Error(err) }) }()
	select {
	case <-loads:
	case <-time.After(5 * time.Second):
		t.Fatal("no onLoad")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Watch = %v after cancel, want nil", err)
	}
}

// A change made after the caller's Load but before the watch started is
// still picked up, by the check Run makes when it starts.
func TestWatcherChangeBeforeStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gatehouse.yaml")
	writeFile(t, path, version(1))
	current := load(t, path)
	writeFile(t, path, version(2))
	ww := startWatcher(t, path, current)
	ww.expectLoad(t, "127.0.0.1:2000")
}

func TestWatcherFirstCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gatehouse.yaml")
	writeFile(t, path, version(1))
	t.Run("unchanged since SetCurrent: quiet", func(t *testing.T) {
		startWatcher(t, path, load(t, path)).expectNothing(t)
	})
	t.Run("no SetCurrent: one load", func(t *testing.T) {
		startWatcher(t, path, nil).expectLoad(t, "127.0.0.1:1000")
	})
	t.Run("file missing: one error", func(t *testing.T) {
		startWatcher(t, path+".missing", nil).expectError(t, "no such file")
	})
}

func TestWatcherMissingDirectory(t *testing.T) {
	w := NewWatcher(filepath.Join(t.TempDir(), "nope", "gatehouse.yaml"), testTypes(), func(*Config) {}, func(error) {})
	if err := w.Run(context.Background()); err == nil {
		t.Fatal("Run on a missing directory returned nil")
	}
}

// Run owns its goroutines: when ctx ends, Run returns and nothing of the
// watcher (or of fsnotify) is left running.
func TestWatcherNoGoroutineLeak(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gatehouse.yaml")
	writeFile(t, path, version(1))
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		w := NewWatcher(path, testTypes(), func(*Config) {}, func(error) {})
		w.Debounce = testDebounce
		ready := make(chan struct{})
		w.ready = func() { close(ready) }
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		<-ready
		writeFile(t, path, version(2)) // leave a debounce timer pending
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		stacks := goroutineStacks()
		if !strings.Contains(stacks, "fsnotify") && !strings.Contains(stacks, "config.(*Watcher)") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left behind:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func goroutineStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
