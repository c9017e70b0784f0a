package sqlite

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"gatehouse/internal/account"
)

// The records go to the driver with a context that never ends, so
// WriteRecords checks the batch's own before each statement: a batch
// whose deadline has passed stores nothing and says why, and the writer
// still works for the next one. A Store closed after writing (its
// statements finalized on the writer connection) opens again with every
// record in place.
func TestWriteRecordsContext(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "w.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	batch := func(from, n int) []account.Record {
		var rs []account.Record
		for i := from; i < from+n; i++ {
			rs = append(rs, account.Record{RequestID: fmt.Sprintf("gh-ctx-%d", i), Time: at.Add(time.Duration(i) * time.Second),
				KeyID: "key_1", Project: "p", Model: "m", Provider: "openai", Status: 200, PromptTokens: 3})
		}
		return rs
	}
	if err := s.WriteRecords(ctx, batch(0, 21)); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.WriteRecords(done, batch(21, 5)); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled batch: %v, want context.Canceled", err)
	}
	if err := s.WriteRecords(ctx, batch(26, 2)); err != nil {
		t.Fatalf("after a cancelled batch: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.Usage(ctx, account.UsageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Requests != 23 || rows[0].PromptTokens != 69 {
		t.Fatalf("usage after reopening: %+v, want 23 requests and 69 prompt tokens", rows)
	}
	if _, err := s.Record(ctx, "gh-ctx-21"); !errors.Is(err, account.ErrNotFound) {
		t.Fatalf("a record of the cancelled batch: %v, want ErrNotFound", err)
	}
}

// endsAfter is a context whose Err is nil for its first n calls and
// context.Canceled after: a batch's deadline passing between two of
// its statements.
type endsAfter struct {
	context.Context
	n int
}

func (c *endsAfter) Err() error {
	if c.n > 0 {
		c.n--
		return nil
	}
	return context.Canceled
}

// A batch that fails after its transaction began (here, its deadline
// passing after the first 64-row INSERT) is rolled back whole, and the
// writer's connection comes back outside a transaction: the next batch
// begins its own and is stored.
func TestWriteRecordsRolledBack(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	batch := func(from, n int) []account.Record {
		var rs []account.Record
		for i := from; i < from+n; i++ {
			rs = append(rs, account.Record{RequestID: fmt.Sprintf("gh-rb-%d", i), Time: at.Add(time.Duration(i) * time.Second),
				KeyID: "key_1", Project: "p", Model: "m", Provider: "openai", Status: 200, PromptTokens: 2})
		}
		return rs
	}
	// Err is asked before BEGIN and before each INSERT: nil twice lets
	// BEGIN and the 64-row INSERT run, then the 4-row one is refused.
	if err := s.WriteRecords(&endsAfter{ctx, 2}, batch(0, 70)); !errors.Is(err, context.Canceled) {
		t.Fatalf("a batch ended half way: %v, want context.Canceled", err)
	}
	if err := s.WriteRecords(ctx, batch(70, 3)); err != nil {
		t.Fatalf("the batch after: %v", err)
	}
	rows, err := s.Usage(ctx, account.UsageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Requests != 3 || rows[0].PromptTokens != 6 {
		t.Fatalf("usage: %+v, want only the 3 records of the second batch", rows)
	}
	if _, err := s.Record(ctx, "gh-rb-0"); !errors.Is(err, account.ErrNotFound) {
		t.Fatalf("a record of the rolled-back batch: %v, want ErrNotFound", err)
	}
}

// TestStoredIDHashes: a batch row's ids column holds each stored
// record's idHash in order — the hashes the duplicate check made, handed
// to the encoder — duplicates within the batch left out, with and
// without the look among the stored records.
func TestStoredIDHashes(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	defer s.Close()
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	var rs []account.Record
	var want []byte
	for i := range 9 {
		id := fmt.Sprintf("gh-hash-%d", i%7) // 7 and 8 repeat 0 and 1
		rs = append(rs, account.Record{RequestID: id, Time: at.Add(time.Duration(i) * time.Millisecond), KeyID: "k", Status: 200})
		if i < 7 {
			want = binary.LittleEndian.AppendUint32(want, idHash(id))
		}
	}
	for _, fresh := range []bool{true, false} {
		if _, err := s.w.ExecContext(ctx, `DELETE FROM record_batches`); err != nil {
			t.Fatal(err)
		}
		write := s.WriteRecords
		if fresh {
			write = s.WriteFreshRecords
		}
		if err := write(ctx, rs); err != nil {
			t.Fatal(err)
		}
		var ids []byte
		if err := s.w.QueryRowContext(ctx, `SELECT ids FROM record_batches`).Scan(&ids); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ids, want) {
			t.Errorf("fresh %v: ids %x, want %x", fresh, ids, want)
		}
	}
}
