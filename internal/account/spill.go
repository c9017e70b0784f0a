package account

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// spill is the sink's append-only overflow: records that could not be
// written to the store (or found the queue full), one JSON line each, in
// a file of this process's own under dir. Files left by earlier
// processes are replayed too; an exclusive flock marks a file as owned by
// a live process, so two gateways sharing a directory never replay one
// file twice.
type spill struct {
	dir string

	mu      sync.Mutex
	own     *os.File // created on the first append
	ownSize int64    // bytes appended to own
	readOff int64    // bytes of own already replayed
	dirty   bool     // appended without fsync
	syncs   int      // fsyncs of own, for tests
	others  []string // earlier processes' files still to replay
	offsets map[string]int64
	lines   []byte // append's buffer, reused
}

// maxLine bounds one spilled record (a record with bodies can be large).
const maxLine = 64 << 20

func openSpill(dir string) (*spill, error) {
	if dir == "" {
		return nil, errors.New("usage sink: no spill directory")
	}
	names, err := filepath.Glob(filepath.Join(dir, "spill-*.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names) // names start with a fixed-width time: oldest first
	return &spill{dir: dir, others: names, offsets: map[string]int64{}}, nil
}

// pending reports whether any spilled record waits for replay.
func (s *spill) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readOff < s.ownSize || len(s.others) > 0
}

// append writes rs at the end of this process's file, fsynced with what
// came before when sync is set. Unsynced appends (a request's record
// that found the queue full) wait for flush, at the writer's next tick:
// until then a crash of the process loses none of them (the kernel has
// them), only one of the machine could, as it could the records still
// queued in memory. Syncing them as they came cost an fsync for every
// other request once the queue was full (BENCHMARKS.md, "The spill
// without an fsync a request").
func (s *spill) append(rs []Record, sync bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own == nil {
		if err := s.create(); err != nil {
			return err
		}
	}
	b := s.lines[:0] // one line per record
	for i := range rs {
		var err error
		if b, err = rs[i].AppendJSON(b); err != nil {
			return err
		}
		b = append(b, '\n')
	}
	if cap(b) <= 1<<20 {
		s.lines = b // kept for the next append, unless a batch made it large
	}
	n, err := s.own.Write(b)
	s.ownSize += int64(n)
	if err != nil {
		return err
	}
	s.dirty = true
	if sync {
		return s.syncOwn()
	}
	return nil
}

// flush fsyncs what was appended without it.
func (s *spill) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own == nil || !s.dirty {
		return nil
	}
	return s.syncOwn()
}

// syncOwn fsyncs this process's file; s.mu is held.
func (s *spill) syncOwn() error {
	s.syncs++
	if err := s.own.Sync(); err != nil {
		return err
	}
	s.dirty = false
	return nil
}

func (s *spill) create() error {
	// The directory is made on the first spill, not at start: most
	// gateways never spill.
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("usage spill directory: %w", err)
	}
	name := filepath.Join(s.dir, fmt.Sprintf("spill-%020d-%d.jsonl", time.Now().UnixNano(), os.Getpid()))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("usage spill file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("usage spill file: lock: %w", err)
	}
	s.own = f
	return nil
}

// replay feeds the spilled records to write, batch records at a time, in
// the order they were spilled: earlier processes' files first, then this
// process's. It stops once limit records are written (limit ≤ 0: when
// every file is replayed), so that the sink's writer can serve its queue
// between replay batches; the next call goes on from there. A batch that
// fails stops the replay too; the next call starts again from that
// batch. bad is told of lines that cannot be decoded (a write cut by a
// crash): they are skipped. It returns how many records were written.
func (s *spill) replay(batch, limit int, write func([]Record) error, bad func(int)) (int, error) {
	total := 0
	left := func() int {
		if limit <= 0 {
			return 0
		}
		return limit - total
	}
	for limit <= 0 || total < limit {
		s.mu.Lock()
		if len(s.others) == 0 {
			s.mu.Unlock()
			n, err := s.replayOwn(batch, left(), write, bad)
			return total + n, err
		}
		name := s.others[0]
		s.mu.Unlock()
		n, state, err := s.replayOther(name, batch, left(), write, bad)
		total += n
		if err != nil {
			return total, err
		}
		if state == otherPartial {
			continue // the limit is reached: the loop ends
		}
		s.mu.Lock()
		s.others = s.others[1:]
		delete(s.offsets, name)
		s.mu.Unlock()
		if state == otherReplayed {
			_ = os.Remove(name)
		}
	}
	return total, nil
}

// How far replayOther got with a file left by another process.
const (
	otherReplayed = iota // every record is in the store: the file can go
	otherLocked          // a live process owns it: left to that one
	otherPartial         // the replay's limit was reached before the end
)

// replayOther replays a file left by another process, from where the
// last call stopped, until limit records are written (limit ≤ 0: to its
// end).
func (s *spill) replayOther(name string, batch, limit int, write func([]Record) error, bad func(int)) (n, state int, err error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, otherReplayed, nil
	}
	if err != nil {
		return 0, otherPartial, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return 0, otherLocked, nil
	}
	st, err := f.Stat()
	if err != nil {
		return 0, otherPartial, err
	}
	s.mu.Lock()
	off := s.offsets[name]
	s.mu.Unlock()
	n, off, err = replayRange(f, off, st.Size(), batch, limit, write, bad)
	s.mu.Lock()
	s.offsets[name] = off
	s.mu.Unlock()
	if err != nil || off < st.Size() {
		return n, otherPartial, err
	}
	return n, otherReplayed, nil
}

// replayOwn replays this process's file up to its current end, or until
// limit records are written (limit ≤ 0: no limit), then empties it if
// everything is replayed and nothing was appended meanwhile.
func (s *spill) replayOwn(batch, limit int, write func([]Record) error, bad func(int)) (int, error) {
	s.mu.Lock()
	f, off, end := s.own, s.readOff, s.ownSize
	s.mu.Unlock()
	if f == nil || off >= end {
		return 0, nil
	}
	n, off, err := replayRange(f, off, end, batch, limit, write, bad)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readOff = off
	if err == nil && s.readOff == s.ownSize {
		// Everything is in the store: start the file over (O_APPEND
		// writes go to the new end).
		if terr := s.own.Truncate(0); terr == nil {
			s.ownSize, s.readOff = 0, 0
		}
	}
	return n, err
}

// replayRange writes the records of f between off and end, stopping
// after the batch that brings them to limit (limit ≤ 0: at end), and
// returns the offset up to which they are stored.
func replayRange(f *os.File, off, end int64, batch, limit int, write func([]Record) error, bad func(int)) (int, int64, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, off, end-off), 256<<10)
	rs := make([]Record, 0, batch)
	var pendingBytes int64
	total := 0
	// Unreadable lines are told of once they lie behind off, so that a
	// replay stopped by a failing batch does not count them again.
	badLines, badPending := 0, 0
	defer func() {
		if badLines > 0 {
			bad(badLines)
		}
	}()
	flush := func() error {
		if len(rs) > 0 {
			if err := write(rs); err != nil {
				return err
			}
			total += len(rs)
		}
		off += pendingBytes
		badLines += badPending
		pendingBytes, badPending = 0, 0
		rs = rs[:0]
		return nil
	}
	for limit <= 0 || total < limit {
		line, err := readLine(r)
		if len(line) > 0 {
			pendingBytes += int64(len(line))
			var rec Record
			// UnmarshalJSON validates the line as it reads it: json.Unmarshal
			// would scan it once more before calling it.
			if jerr := rec.UnmarshalJSON(line); jerr != nil || rec.RequestID == "" {
				badPending++
			} else {
				rs = append(rs, rec)
			}
			if len(rs) == batch {
				if ferr := flush(); ferr != nil {
					return total, off, ferr
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return total, off, err
		}
	}
	if err := flush(); err != nil {
		return total, off, err
	}
	return total, off, nil
}

// readLine returns the next line with its newline (the last line of a
// file may lack one).
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			if len(line) > maxLine {
				return line, fmt.Errorf("usage spill: line longer than %s bytes", strconv.Itoa(maxLine))
			}
			continue
		}
		return line, err
	}
}

func (s *spill) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own == nil {
		return nil
	}
	var err error
	if s.dirty {
		err = s.syncOwn()
	}
	empty := s.ownSize == 0 || s.readOff >= s.ownSize
	name := s.own.Name()
	err = errors.Join(err, s.own.Close())
	s.own = nil
	if empty {
		_ = os.Remove(name)
	}
	return err
}
