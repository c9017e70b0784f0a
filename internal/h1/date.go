package h1

import (
	"net/http"
	"time"
)

// dateLine is a Date field's value and the second it is for.
type dateLine struct {
	sec int64
	b   []byte
}

// date is the Date field's value for now, formatted once a second and
// shared by every response of that second on the server (the field has a
// resolution of one second anyway).
func (s *Server) dateValue() []byte {
	now := time.Now()
	sec := now.Unix()
	if d := s.date.Load(); d != nil && d.sec == sec {
		return d.b
	}
	d := &dateLine{sec: sec, b: now.UTC().AppendFormat(make([]byte, 0, len(http.TimeFormat)), http.TimeFormat)}
	s.date.Store(d)
	return d.b
}
