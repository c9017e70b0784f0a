package h1

import (
	"net/http"
	"sync/atomic"
	"time"
)

// dateLine is a Date field's value and the second it is for.
type dateLine struct {
	sec int64
	b   []byte
}

var cachedDate atomic.Pointer[dateLine]

// date is the Date field's value for now, formatted once a second and
// shared by every response of that second (the field has a resolution of
// one second anyway).
func date() []byte {
	now := time.Now()
	sec := now.Unix()
	if d := cachedDate.Load(); d != nil && d.sec == sec {
		return d.b
	}
	d := &dateLine{sec: sec, b: now.UTC().AppendFormat(make([]byte, 0, len(http.TimeFormat)), http.TimeFormat)}
	cachedDate.Store(d)
	return d.b
}
