package cache

import (
	"context"
	"time"
)

// VectorStore keeps the semantic index's vectors across restarts (the
// SQLite file in embedded mode).
type VectorStore interface {
	PutVector(ctx context.Context, scope string, key Key, vec []float32) error
	DeleteVectors(ctx context.Context, keys []Key) error
	// LoadVectors calls fn with at most limit vectors, newest first.
	LoadVectors(ctx context.Context, limit int, fn func(scope string, key Key, vec []float32)) error
}

// LoadVectors fills v from s at start: the newest vectors, up to v's
// bound. It reports how many it loaded.
func LoadVectors(ctx context.Context, s VectorStore, v *Vectors) (int, error) {
	n := 0
	err := s.LoadVectors(ctx, v.max, func(scope string, key Key, vec []float32) {
		v.Add(scope, key, vec)
		n++
	})
	return n, err
}

// VectorLog writes the index's changes to a VectorStore in the
// background, so indexing never waits on the disk. A change that finds
// its queue full is dropped: the index in memory is still right, and a
// restart loses at most that vector.
type VectorLog struct {
	store VectorStore
	ops   chan vectorOp
	done  chan struct{}
	onErr func(error)
}

type vectorOp struct {
	scope   string
	key     Key
	vec     []float32
	evicted []Key
}

// NewVectorLog starts the background writer; Close drains and stops it.
func NewVectorLog(s VectorStore, onErr func(error)) *VectorLog {
	if onErr == nil {
		onErr = func(error) {}
	}
	l := &VectorLog{store: s, ops: make(chan vectorOp, 1024), done: make(chan struct{}), onErr: onErr}
	go func() {
		defer close(l.done)
		for op := range l.ops {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if len(op.evicted) > 0 {
				if err := l.store.DeleteVectors(ctx, op.evicted); err != nil {
					l.onErr(err)
				}
			}
			if err := l.store.PutVector(ctx, op.scope, op.key, op.vec); err != nil {
				l.onErr(err)
			}
			cancel()
		}
	}()
	return l
}

// Kept queues a vector indexed under key in scope, and the keys evicted
// to make room (server.Semantic.Kept).
func (l *VectorLog) Kept(scope string, key Key, vec []float32, evicted []Key) {
	select {
	case l.ops <- vectorOp{scope, key, vec, evicted}:
	default:
	}
}

// Close writes what is queued and stops. No Kept may follow it.
func (l *VectorLog) Close() {
	close(l.ops)
	<-l.done
}

// VectorIndex is where the semantic cache looks for the closest stored
// question: the in-process index (LocalIndex) or PostgreSQL with
// pgvector, shared by every replica.
type VectorIndex interface {
	// SearchVector returns the key whose vector is closest to q in
	// scope, with their cosine; false when the scope holds none.
	SearchVector(ctx context.Context, scope string, q []float32) (Key, float32, bool, error)
	AddVector(ctx context.Context, scope string, key Key, vec []float32) error
	RemoveVector(ctx context.Context, scope string, key Key) error
}

// LocalIndex is the in-process Vectors as a VectorIndex, its changes
// persisted through Log when it is set.
type LocalIndex struct {
	Vectors *Vectors
	Log     *VectorLog // nil: memory only
}

// SearchVector implements VectorIndex.
func (l LocalIndex) SearchVector(_ context.Context, scope string, q []float32) (Key, float32, bool, error) {
	k, score, ok := l.Vectors.Search(scope, q)
	return k, score, ok, nil
}

// AddVector implements VectorIndex.
func (l LocalIndex) AddVector(_ context.Context, scope string, key Key, vec []float32) error {
	evicted := l.Vectors.Add(scope, key, vec)
	if l.Log != nil {
		l.Log.Kept(scope, key, vec, evicted)
	}
	return nil
}

// RemoveVector implements VectorIndex. The persisted copy goes at its
// next eviction or load (a vector whose answer is gone is dropped again
// at its next match).
func (l LocalIndex) RemoveVector(_ context.Context, scope string, key Key) error {
	l.Vectors.Remove(scope, key)
	return nil
}
