package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"gatehouse/internal/responses"
)

// memResponses is the server tests' responses.Store, in memory; the real
// ones (SQLite, PostgreSQL) are held to the store contract in
// internal/store/storetest. broken makes every call fail, as an
// unreachable database does.
type memResponses struct {
	mu     sync.Mutex
	m      map[string]responses.Stored
	broken bool
}

var errStoreDown = errors.New("store down")

func newMemResponses() *memResponses { return &memResponses{m: map[string]responses.Stored{}} }

func (s *memResponses) setBroken(b bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broken = b
}

func (s *memResponses) PutResponse(_ context.Context, r *responses.Stored) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		return errStoreDown
	}
	s.m[r.ID] = *r
	return nil
}

func (s *memResponses) Response(_ context.Context, project, id string) (*responses.Stored, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		return nil, false, errStoreDown
	}
	r, ok := s.m[id]
	if !ok || r.Project != project {
		return nil, false, nil
	}
	return &r, true, nil
}

func (s *memResponses) DeleteResponse(_ context.Context, project, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		return false, errStoreDown
	}
	r, ok := s.m[id]
	if !ok || r.Project != project {
		return false, nil
	}
	delete(s.m, id)
	return true, nil
}

func (s *memResponses) DeleteResponsesBefore(_ context.Context, before time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, r := range s.m {
		if n < limit && r.CreatedAt.Before(before) {
			delete(s.m, id)
			n++
		}
	}
	return n, nil
}
