package sqlite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/llm"
)

// Usage records are stored a batch to a row of record_batches (migration
// 0017): the records encoded one after another in one blob, beside what
// lets a reader pass a batch by without decoding it — its time range,
// the distinct values of the fields the log viewer and the usage API
// filter on (batchSummary), and a 32-bit hash of each request id. A row
// per record cost SQLite ~80,000 instructions a record (binding 29
// values, the VDBE, the table and five index b-trees); a row per batch
// costs that once for the whole batch (BENCHMARKS.md, "What a record
// costs, part four").
//
// The encoding of a batch (batchVersion):
//
//	version byte, record count (4 bytes little-endian: patched in once the
//	batch is whole), then per record, in this order:
//	request id, time (zigzag varint: microseconds after the previous
//	record's, the first after 0), endpoint, key id, project id, project,
//	customer, model, served model, provider, deployment, status (uvarint),
//	error kind, prompt, completion, cached and reasoning tokens, cost and
//	saved micro-dollars (zigzag varints), usage source, latency, ttft and
//	overhead ms (8-byte little-endian float64 bits), cache, attempts
//	(uvarint), stream (one byte 0/1), labels (uvarint count, then key and
//	value strings, keys ascending), request body, response body.
//
// A string is uvarint 0 when it equals the same field of the previous
// record (the first record's previous is all empty), else uvarint len+1
// and its bytes: keys, models, providers and endpoints repeat across a
// batch, and a repeat costs one byte and a compare. Request ids and
// bodies are never repeats; labels are written whole.
const batchVersion = 1

// errCorruptBatch is wrapped by every decoding failure: a blob that is
// truncated, has trailing bytes, or holds a value out of range.
var errCorruptBatch = errors.New("corrupt usage record batch")

// batchEncoder encodes records and keeps what the row beside the blob
// holds. Its buffers are reused from batch to batch.
type batchEncoder struct {
	buf     []byte
	ids     []byte
	sum     batchSummary
	prev    *account.Record // the previous record, for repeats; &noRecord at first
	prevAt  int64
	n       int
	minT    int64
	maxT    int64
	started bool
}

// reset starts a new batch.
func (e *batchEncoder) reset() {
	e.buf = append(e.buf[:0], batchVersion, 0, 0, 0, 0)
	e.ids = e.ids[:0]
	e.sum.reset()
	e.prev = &noRecord
	e.prevAt, e.n, e.minT, e.maxT, e.started = 0, 0, 0, 0, false
}

// blob returns the encoded batch, its record count patched in. It is
// good until the next reset.
func (e *batchEncoder) blob() []byte {
	binary.LittleEndian.PutUint32(e.buf[1:5], uint32(e.n))
	return e.buf
}

// appendStr appends s, or the mark of a repeat when it equals prev, and
// reports whether it did the latter. The encoder's appends are functions
// of a local slice, not methods writing e.buf: the slice stays in
// registers across a record's thirty fields instead of being loaded and
// stored back around each.
func appendStr(b []byte, s, prev string) ([]byte, bool) {
	if llm.SameString(s, prev) {
		return append(b, 0), true
	}
	b = binary.AppendUvarint(b, uint64(len(s))+1)
	return append(b, s...), false
}

// appendWhole appends s whole: its length and its bytes. An empty one
// (the bodies of nearly every record) is its length's one byte, written
// without the append of no bytes, which still calls memmove.
func appendWhole(b []byte, s string) []byte {
	if s == "" {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendF64(b []byte, v float64) []byte {
	if v != v {
		v = 0 // NaN: stored as 0, as the other stores do
	}
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

// noRecord is the previous record of a batch's first: all empty.
var noRecord account.Record

// add appends r to the batch. r must stay as it is until the next add or
// reset: the next record's repeats are found by comparing with it.
func (e *batchEncoder) add(r *account.Record) { e.addHashed(r, idHash(r.RequestID)) }

// addHashed is add for a record whose request id's idHash is known
// already (the writer's duplicate check made it).
func (e *batchEncoder) addHashed(r *account.Record, id uint32) {
	at := unixMicros(r.Time)
	if !e.started {
		e.minT, e.maxT, e.started = at, at, true
	}
	e.minT, e.maxT = min(e.minT, at), max(e.maxT, at)
	p, first := e.prev, e.n == 0
	b := appendWhole(e.buf, r.RequestID)
	b = binary.AppendVarint(b, at-e.prevAt)
	b, _ = appendStr(b, r.Endpoint, p.Endpoint)
	// A value the previous record had is in the summary already.
	var same bool
	if b, same = appendStr(b, r.KeyID, p.KeyID); !same || first {
		e.sum.put(sumKey, r.KeyID)
	}
	if b, same = appendStr(b, r.ProjectID, p.ProjectID); !same || first {
		e.sum.put(sumProjectID, r.ProjectID)
	}
	if b, same = appendStr(b, r.Project, p.Project); !same || first {
		e.sum.put(sumProject, r.Project)
	}
	if b, same = appendStr(b, r.Customer, p.Customer); !same || first {
		e.sum.put(sumCustomer, r.Customer)
	}
	if b, same = appendStr(b, r.Model, p.Model); !same || first {
		e.sum.put(sumModel, r.Model)
	}
	b, _ = appendStr(b, r.ServedModel, p.ServedModel)
	if b, same = appendStr(b, r.Provider, p.Provider); !same || first {
		e.sum.put(sumProvider, r.Provider)
	}
	b, _ = appendStr(b, r.Deployment, p.Deployment)
	if r.Status != p.Status || first {
		e.sum.putStatus(r.Status)
	}
	b = binary.AppendUvarint(b, uint64(max(r.Status, 0)))
	b, _ = appendStr(b, r.ErrorKind, p.ErrorKind)
	b = binary.AppendVarint(b, int64(r.PromptTokens))
	b = binary.AppendVarint(b, int64(r.CompletionTokens))
	b = binary.AppendVarint(b, int64(r.CachedTokens))
	b = binary.AppendVarint(b, int64(r.ReasoningTokens))
	b = binary.AppendVarint(b, int64(r.Cost))
	b = binary.AppendVarint(b, int64(r.Saved))
	b, _ = appendStr(b, r.UsageSource, p.UsageSource)
	b = appendF64(b, r.LatencyMS)
	b = appendF64(b, r.TTFTMS)
	b = appendF64(b, r.OverheadMS)
	if b, same = appendStr(b, r.Cache, p.Cache); !same || first {
		e.sum.put(sumCache, r.Cache)
	}
	b = binary.AppendUvarint(b, uint64(max(r.Attempts, 0)))
	if r.Stream {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	if len(r.Labels) == 0 { // most records: the count 0, without the call
		b = append(b, 0)
	} else {
		b = appendLabels(b, r.Labels)
	}
	b = appendWhole(b, r.RequestBody)
	e.buf = appendWhole(b, r.ResponseBody)

	e.prev = r
	e.prevAt = at
	e.ids = binary.LittleEndian.AppendUint32(e.ids, id)
	e.n++
}

func appendLabels(b []byte, m map[string]string) []byte {
	b = binary.AppendUvarint(b, uint64(len(m)))
	switch len(m) {
	case 0:
		return b
	case 1:
		for k, v := range m {
			b = appendWhole(appendWhole(b, k), v)
		}
		return b
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendWhole(appendWhole(b, k), m[k])
	}
	return b
}

// idHash is the 32-bit FNV-1a hash of a request id: what a batch row
// keeps of its ids, so a lookup by id or a replay check reads 4 bytes a
// record and decodes only a batch whose hash matches.
//
// Every record's id is hashed as its batch is written (a request id is
// some 30 bytes), so the loop takes four bytes a turn: the same hash, a
// quarter of the loop's own compares and jumps.
func idHash(id string) uint32 {
	const prime = 16777619
	h := uint32(2166136261)
	for ; len(id) >= 4; id = id[4:] {
		h = (h ^ uint32(id[0])) * prime
		h = (h ^ uint32(id[1])) * prime
		h = (h ^ uint32(id[2])) * prime
		h = (h ^ uint32(id[3])) * prime
	}
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * prime
	}
	return h
}

// batchDecoder reads an encoded batch. Strings of the records it returns
// share the one string the blob was converted to.
type batchDecoder struct {
	s   string
	off int
	err error
}

func (d *batchDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d of %d", errCorruptBatch, what, d.off, len(d.s))
	}
}

func (d *batchDecoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	var v uint64
	var shift uint
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if d.off >= len(d.s) {
			break
		}
		c := d.s[d.off]
		d.off++
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			return v | uint64(c)<<shift
		}
		v |= uint64(c&0x7f) << shift
		shift += 7
	}
	d.fail(what)
	return 0
}

func (d *batchDecoder) varint(what string) int64 {
	u := d.uvarint(what)
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (d *batchDecoder) take(n uint64, what string) string {
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.s)-d.off) {
		d.fail(what)
		return ""
	}
	s := d.s[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

func (d *batchDecoder) whole(what string) string { return d.take(d.uvarint(what), what) }

// str reads a string that may repeat prev.
func (d *batchDecoder) str(prev, what string) string {
	n := d.uvarint(what)
	if n == 0 {
		return prev
	}
	return d.take(n-1, what)
}

func (d *batchDecoder) f64(what string) float64 {
	s := d.take(8, what)
	if len(s) != 8 {
		return 0
	}
	var u uint64
	for i := 7; i >= 0; i-- {
		u = u<<8 | uint64(s[i])
	}
	return math.Float64frombits(u)
}

func (d *batchDecoder) small(what string) int {
	v := d.uvarint(what)
	if v > math.MaxInt32 {
		d.fail(what)
		return 0
	}
	return int(v)
}

// decodeBatch decodes a whole batch. A blob it cannot read gives an
// error wrapping errCorruptBatch, never a panic or a partial batch.
func decodeBatch(blob string) ([]account.Record, error) {
	var rs []account.Record
	err := eachRecord(blob, func(n int) { rs = make([]account.Record, 0, n) }, func(r *account.Record) error {
		rs = append(rs, *r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// eachRecord decodes blob a record at a time into one Record, which it
// hands to fn (after count with the number of records, when count is not
// nil). fn must copy what it keeps: the next record is decoded over it.
// Readers that keep few of a batch's records (a log page, a lookup by id,
// the sums of the usage API) so allocate nothing per record but the
// labels. A blob it cannot read gives an error wrapping errCorruptBatch
// (after fn has seen the records before the damage), never a panic.
func eachRecord(blob string, count func(int), fn func(*account.Record) error) error {
	d := batchDecoder{s: blob}
	if len(blob) == 0 || blob[0] != batchVersion {
		return fmt.Errorf("%w: unknown version", errCorruptBatch)
	}
	if len(blob) < 5 {
		return fmt.Errorf("%w: no record count", errCorruptBatch)
	}
	d.off = 5
	n := uint64(blob[1]) | uint64(blob[2])<<8 | uint64(blob[3])<<16 | uint64(blob[4])<<24
	// Every record takes at least 40 bytes (three floats and more), so a
	// count beyond that is a corrupt one, not a huge allocation.
	if n > uint64(len(blob))/40 {
		d.fail("record count")
		return d.err
	}
	if count != nil {
		count(int(n))
	}
	// Each string field that may repeat the previous record's is decoded
	// over it, so r holds the previous record's value when it is read.
	var r account.Record
	var at int64
	for range n {
		r.RequestID = d.whole("request id")
		at += d.varint("time")
		r.Time = time.UnixMicro(at).UTC()
		r.Endpoint = d.str(r.Endpoint, "endpoint")
		r.KeyID = d.str(r.KeyID, "key id")
		r.ProjectID = d.str(r.ProjectID, "project id")
		r.Project = d.str(r.Project, "project")
		r.Customer = d.str(r.Customer, "customer")
		r.Model = d.str(r.Model, "model")
		r.ServedModel = d.str(r.ServedModel, "served model")
		r.Provider = d.str(r.Provider, "provider")
		r.Deployment = d.str(r.Deployment, "deployment")
		r.Status = d.small("status")
		r.ErrorKind = d.str(r.ErrorKind, "error kind")
		r.PromptTokens = int(d.varint("prompt tokens"))
		r.CompletionTokens = int(d.varint("completion tokens"))
		r.CachedTokens = int(d.varint("cached tokens"))
		r.ReasoningTokens = int(d.varint("reasoning tokens"))
		r.Cost = account.Micros(d.varint("cost"))
		r.Saved = account.Micros(d.varint("saved"))
		r.UsageSource = d.str(r.UsageSource, "usage source")
		r.LatencyMS = d.f64("latency")
		r.TTFTMS = d.f64("ttft")
		r.OverheadMS = d.f64("overhead")
		r.Cache = d.str(r.Cache, "cache")
		r.Attempts = d.small("attempts")
		switch d.take(1, "stream") {
		case "\x00":
			r.Stream = false
		case "\x01":
			r.Stream = true
		default:
			d.fail("stream")
		}
		r.Labels = nil
		if nl := d.uvarint("labels"); nl > 0 && d.err == nil {
			if nl > uint64(len(blob)-d.off)/2 {
				d.fail("labels")
			} else {
				r.Labels = make(map[string]string, nl)
				for range nl {
					k := d.whole("label")
					r.Labels[k] = d.whole("label")
				}
			}
		}
		r.RequestBody = d.whole("request body")
		r.ResponseBody = d.whole("response body")
		if d.err != nil {
			return d.err
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	if d.off != len(blob) {
		return fmt.Errorf("%w: %d bytes after the last record", errCorruptBatch, len(blob)-d.off)
	}
	return nil
}

// batchSummary is what a batch row says of its records' filter fields:
// their distinct values, so that a filter on any of them passes a batch
// that holds no match without decoding it. Up to summaryCap distinct
// values of a field are listed; a field with more in one batch (the
// customers of a batch of a thousand requests, say) is kept as a Bloom
// filter of ten bits a value instead, which lets a filter pass by about
// 99 in 100 batches that lack its value: the list stays cheap to build
// for the common batch, and a filter on a rare customer still skips.
type batchSummary struct {
	fields [summaryFields][]string
	over   [summaryFields]map[string]struct{} // a field's values past summaryCap; nil while listed
}

// The summary's fields, in its encoding's order.
const (
	sumKey = iota
	sumProject
	sumProjectID
	sumCustomer
	sumModel
	sumProvider
	sumCache
	sumStatus
	summaryFields
)

const summaryCap = 64

func (s *batchSummary) reset() {
	for i := range s.fields {
		s.fields[i] = s.fields[i][:0]
		s.over[i] = nil
	}
}

func (s *batchSummary) put(f int, v string) {
	if m := s.over[f]; m != nil {
		m[v] = struct{}{}
		return
	}
	vs := s.fields[f]
	// The newest value first: records of one batch often repeat the
	// previous record's.
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i] == v {
			return
		}
	}
	if len(vs) == summaryCap {
		m := make(map[string]struct{}, 4*summaryCap)
		for _, have := range vs {
			m[have] = struct{}{}
		}
		m[v] = struct{}{}
		s.over[f], s.fields[f] = m, vs[:0]
		return
	}
	s.fields[f] = append(vs, v)
}

// putStatus adds a status (0, none, is not kept).
func (s *batchSummary) putStatus(status int) {
	if status == 0 {
		return
	}
	var b [20]byte
	v := strconv.AppendInt(b[:0], int64(status), 10)
	if s.over[sumStatus] == nil {
		for _, have := range s.fields[sumStatus] {
			if have == string(v) {
				return
			}
		}
	}
	s.put(sumStatus, string(v))
}

// bloomProbes is the number of bits a value sets in a summary's Bloom
// filter; with ten bits a value, about one value in a hundred that is
// not there is taken for one that is.
const bloomProbes = 4

// bloomBits are the bit positions of v in a filter of m bits (double
// hashing of a 64-bit FNV-1a).
func bloomBits(v string, m uint64, at *[bloomProbes]uint64) {
	h := uint64(14695981039346656037)
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= 1099511628211
	}
	h1, h2 := h&math.MaxUint32, h>>32|1
	for i := range at {
		at[i] = (h1 + uint64(i)*h2) % m
	}
}

// appendTo encodes s into dst[:0]. Per field: the value count + 1 and
// the values (uvarint length and bytes); or, past summaryCap, uvarint 0,
// the Bloom filter's length in bytes and its bytes.
func (s *batchSummary) appendTo(dst []byte) []byte {
	dst = dst[:0]
	for f := range s.fields {
		if m := s.over[f]; m != nil {
			n := (10*len(m) + 7) / 8
			dst = append(dst, 0)
			dst = binary.AppendUvarint(dst, uint64(n))
			at := len(dst)
			dst = append(dst, make([]byte, n)...)
			bits := dst[at:]
			var pos [bloomProbes]uint64
			for v := range m {
				bloomBits(v, uint64(8*n), &pos)
				for _, p := range pos {
					bits[p/8] |= 1 << (p % 8)
				}
			}
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(s.fields[f]))+1)
		for _, v := range s.fields[f] {
			dst = binary.AppendUvarint(dst, uint64(len(v)))
			dst = append(dst, v...)
		}
	}
	return dst
}

// summaryMatches reports whether a batch whose encoded summary is sum
// may hold a record f matches (its time window apart, which the batch
// row's min and max times answer). A corrupt summary is an error.
func summaryMatches(sum []byte, f *account.Filter) (bool, error) {
	var want [summaryFields]string
	filtered := false
	set := func(i int, v string) {
		if v != "" {
			want[i], filtered = v, true
		}
	}
	set(sumKey, f.Key)
	set(sumProject, f.Project)
	set(sumProjectID, f.Project) // the project filter matches the name or the id
	set(sumCustomer, f.Customer)
	set(sumModel, f.Model)
	set(sumProvider, f.Provider)
	set(sumCache, f.Cache)
	if f.Status != 0 {
		set(sumStatus, strconv.Itoa(f.Status))
	}
	if !filtered {
		return true, nil
	}
	d := batchDecoder{s: string(sum)}
	var found [summaryFields]bool
	for field := range summaryFields {
		w := want[field]
		n := d.uvarint("summary")
		if n == 0 { // a Bloom filter
			bits := d.whole("summary filter")
			if d.err != nil {
				return false, d.err
			}
			found[field] = true
			if w != "" && len(bits) > 0 {
				var pos [bloomProbes]uint64
				bloomBits(w, uint64(8*len(bits)), &pos)
				for _, p := range pos {
					if bits[p/8]&(1<<(p%8)) == 0 {
						found[field] = false
					}
				}
			}
			continue
		}
		for range n - 1 {
			v := d.whole("summary value")
			if d.err != nil {
				return false, d.err
			}
			if w != "" && v == w {
				found[field] = true
			}
		}
		if d.err != nil {
			return false, d.err
		}
	}
	if d.off != len(d.s) {
		return false, fmt.Errorf("%w: summary has trailing bytes", errCorruptBatch)
	}
	for field, w := range want {
		switch {
		case w == "" || found[field]:
		case field == sumProject && found[sumProjectID], field == sumProjectID && found[sumProject]:
		default:
			return false, nil
		}
	}
	return true, nil
}
