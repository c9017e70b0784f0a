package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
)

// A request body is a JSON object whose members are applied to a record
// one field at a time through a table of setters. The same table serves
// create (applied to a record with defaults) and PATCH (applied to the
// stored record), so a field is validated in one place, an absent member
// leaves a field alone and an explicit null clears an optional one.

// field sets one member of a request body on a record of type T.
type field[T any] struct {
	name string
	// createOnly fields may be given at creation and never changed.
	createOnly bool
	set        func(rec *T, v json.RawMessage) error
}

// object reads the request body as a JSON object.
func object(r *http.Request) (map[string]json.RawMessage, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return nil, &llm.Error{Kind: llm.KindMediaType, Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error",
				Code: "unsupported_media_type", Message: "Send the body as application/json, not " + quote(ct) + "."}
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &llm.Error{Kind: llm.KindTooLarge, Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
				Code: "body_too_large", Message: fmt.Sprintf("The body is over %d bytes.", maxBody)}
		}
		return nil, err
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, llm.BadRequest("", "invalid_body", "The body must be a JSON object.")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, llm.BadRequest("", "invalid_json", "The body is not valid JSON: %s.", strings.TrimPrefix(err.Error(), "json: "))
	}
	return obj, nil
}

// apply sets every member of obj on rec. Members are applied in name
// order so that, of several bad fields, the same one is always reported.
func apply[T any](fields []field[T], obj map[string]json.RawMessage, rec *T, creating bool) error {
	names := make([]string, 0, len(obj))
	for n := range obj {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		i := slices.IndexFunc(fields, func(f field[T]) bool { return f.name == n })
		if i < 0 {
			return llm.BadRequest(n, "unknown_field", "%s: unknown or read-only field.", n)
		}
		f := fields[i]
		if f.createOnly && !creating {
			return llm.BadRequest(n, "immutable_field", "%s: cannot be changed after creation.", n)
		}
		if err := f.set(rec, obj[n]); err != nil {
			return fieldError(n, err)
		}
	}
	return nil
}

// fieldError names the field in a setter's complaint.
func fieldError(name string, err error) error {
	var ge *llm.Error
	if errors.As(err, &ge) {
		return ge
	}
	return llm.BadRequest(name, "invalid_field", "%s: %s.", name, err.Error())
}

func isNull(v json.RawMessage) bool { return string(v) == "null" }

// kindOf names the JSON type of v for messages.
func kindOf(v json.RawMessage) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func wrongType(want string, v json.RawMessage) error {
	return fmt.Errorf("must be %s, not %s", want, kindOf(v))
}

// Setters. Each returns an error phrased to follow "field: ".

func setString(dst *string, v json.RawMessage, nullable bool) error {
	if isNull(v) && nullable {
		*dst = ""
		return nil
	}
	if len(v) == 0 || v[0] != '"' {
		return wrongType("a string", v)
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return err
	}
	if len(s) > 256 {
		return errors.New("must be at most 256 characters")
	}
	*dst = s
	return nil
}

// setCount sets a non-negative integer limit; null means 0, unlimited.
func setCount(dst *int, v json.RawMessage) error {
	if isNull(v) {
		*dst = 0
		return nil
	}
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return wrongType("a non-negative integer", v)
	}
	n, err := strconv.ParseInt(string(v), 10, 32)
	if err != nil {
		return fmt.Errorf("must be a non-negative integer, not %s", v)
	}
	if n < 0 {
		return fmt.Errorf("must not be negative (0 means unlimited), got %d", n)
	}
	*dst = int(n)
	return nil
}

func parseUSD(v json.RawMessage) (float64, error) {
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return 0, wrongType("a number of US dollars", v)
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("must be a number of US dollars, not %s", v)
	}
	if f < 0 {
		return 0, fmt.Errorf("must not be negative, got %s", v)
	}
	return f, nil
}

func setUSD(dst **float64, v json.RawMessage) error {
	if isNull(v) {
		*dst = nil
		return nil
	}
	f, err := parseUSD(v)
	if err != nil {
		return err
	}
	*dst = &f
	return nil
}

func setBudget(dst **auth.Budget, v json.RawMessage) error {
	if isNull(v) {
		*dst = nil
		return nil
	}
	if len(v) == 0 || v[0] != '{' {
		return wrongType(`an object {"usd": …, "period": …}`, v)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		return err
	}
	for name := range raw {
		if name != "usd" && name != "period" {
			return fmt.Errorf("unknown field %q (a budget has usd and period)", name)
		}
	}
	var b auth.Budget
	usd, ok := raw["usd"]
	if !ok {
		return errors.New("usd is required")
	}
	f, err := parseUSD(usd)
	if err != nil {
		return fmt.Errorf("usd %w", err)
	}
	b.USD = f
	if p, ok := raw["period"]; ok {
		if err := setString(&b.Period, p, false); err != nil {
			return fmt.Errorf("period %w", err)
		}
	}
	switch b.Period {
	case auth.PeriodDay, auth.PeriodWeek, auth.PeriodMonth, auth.PeriodTotal:
	case "":
		return errors.New("period is required (day, week, month or total)")
	default:
		return fmt.Errorf("period must be day, week, month or total, not %q", b.Period)
	}
	*dst = &b
	return nil
}

// setModelLimits sets rates per model: an object of model names, each
// {"rpm": n, "tpm": n} with either member optional; null or {} clears.
func setModelLimits(dst *map[string]auth.Limits, v json.RawMessage) error {
	if isNull(v) {
		*dst = nil
		return nil
	}
	if len(v) == 0 || v[0] != '{' {
		return wrongType(`an object {"MODEL": {"rpm": …, "tpm": …}}`, v)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		return err
	}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	slices.Sort(names) // the same bad entry is always the one reported
	out := make(map[string]auth.Limits, len(raw))
	for _, name := range names {
		if strings.TrimSpace(name) == "" || len(name) > 256 {
			return errors.New("model names must be 1 to 256 characters, not blank")
		}
		lim, err := parseLimits(raw[name])
		if err != nil {
			return fmt.Errorf("%s: %w", quote(name), err)
		}
		out[name] = lim
	}
	if len(out) == 0 {
		out = nil
	}
	*dst = out
	return nil
}

// parseLimits reads {"rpm": n, "tpm": n}; a missing member is 0, unlimited.
func parseLimits(v json.RawMessage) (auth.Limits, error) {
	var l auth.Limits
	if len(v) == 0 || v[0] != '{' {
		return l, wrongType(`an object {"rpm": …, "tpm": …}`, v)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		return l, err
	}
	for name, m := range raw {
		var dst *int
		switch name {
		case "rpm":
			dst = &l.RPM
		case "tpm":
			dst = &l.TPM
		default:
			return l, fmt.Errorf("unknown field %q (model limits have rpm and tpm)", name)
		}
		if err := setCount(dst, m); err != nil {
			return l, fmt.Errorf("%s %w", name, err)
		}
	}
	return l, nil
}

func setList(dst *[]string, v json.RawMessage) error {
	if isNull(v) {
		*dst = nil
		return nil
	}
	if len(v) == 0 || v[0] != '[' {
		return wrongType("an array of strings", v)
	}
	var l []string
	if err := json.Unmarshal(v, &l); err != nil {
		return errors.New("must be an array of strings")
	}
	for _, s := range l {
		if strings.TrimSpace(s) == "" {
			return errors.New("must not contain empty names")
		}
	}
	if len(l) == 0 {
		l = nil
	}
	*dst = l
	return nil
}

func setLabels(dst *map[string]string, v json.RawMessage) error {
	if isNull(v) {
		*dst = nil
		return nil
	}
	if len(v) == 0 || v[0] != '{' {
		return wrongType("an object of string values", v)
	}
	var m map[string]string
	if err := json.Unmarshal(v, &m); err != nil {
		return errors.New("must be an object of string values")
	}
	for k := range m {
		if k == "" {
			return errors.New("must not have an empty label name")
		}
	}
	if len(m) == 0 {
		m = nil
	}
	*dst = m
	return nil
}

func setBool(dst *bool, v json.RawMessage) error {
	switch string(v) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return wrongType("a boolean", v)
	}
	return nil
}

func setOptBool(dst **bool, v json.RawMessage) error {
	if isNull(v) {
		*dst = nil
		return nil
	}
	var b bool
	if err := setBool(&b, v); err != nil {
		return err
	}
	*dst = &b
	return nil
}

// setFuture sets an optional time that must lie ahead of now.
func setFuture(dst **time.Time, v json.RawMessage, now time.Time) error {
	if isNull(v) {
		*dst = nil
		return nil
	}
	var s string
	if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return wrongType("an RFC 3339 time", v)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("must be an RFC 3339 time such as 2030-01-02T15:04:05Z, not %q", s)
	}
	if !t.After(now) {
		return errors.New("must be in the future")
	}
	t = t.UTC()
	*dst = &t
	return nil
}

// query parameters of list endpoints.

// page reads limit and after; filters names the other parameters the
// endpoint takes.
func page(r *http.Request, filters ...string) (auth.Page, error) {
	q := r.URL.Query()
	pg := auth.Page{After: q.Get("after"), Limit: defaultLimit}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLimit {
			return pg, llm.BadRequest("limit", "invalid_limit", "limit: must be an integer from 1 to %d, not %q.", maxLimit, s)
		}
		pg.Limit = n
	}
	for name := range q {
		if name != "limit" && name != "after" && !slices.Contains(filters, name) {
			return pg, llm.BadRequest(name, "unknown_parameter", "%s: unknown query parameter (this list takes %s).", name,
				strings.Join(append([]string{"limit", "after"}, filters...), ", "))
		}
	}
	return pg, nil
}

// projectPage reads the query of a list filtered by ?project= (an ID or
// a name): the page to fetch (one more than asked, to tell whether there
// is more), the page size asked for, and the project's ID ("" for all).
func (h *Handler) projectPage(r *http.Request, filters ...string) (pg auth.Page, limit int, projectID string, err error) {
	if pg, err = page(r, append([]string{"project"}, filters...)...); err != nil {
		return pg, 0, "", err
	}
	if ref := r.URL.Query().Get("project"); ref != "" {
		p, err := h.project(r.Context(), ref, "project")
		if err != nil {
			return pg, 0, "", err
		}
		projectID = p.ID
	}
	limit = pg.Limit
	pg.Limit++
	return pg, limit, projectID, nil
}

// list is the body of every list response. Records come in ID order,
// which is creation order; pass next_after as after to get the next page.
type list[T any] struct {
	Object    string `json:"object"` // always "list"
	Data      []T    `json:"data"`
	HasMore   bool   `json:"has_more"`
	NextAfter string `json:"next_after,omitempty"` // set when has_more
}

// newList cuts items (fetched with one more than limit) to a page.
func newList[T any](items []T, limit int, id func(*T) string) list[T] {
	l := list[T]{Object: "list", Data: items}
	if l.Data == nil {
		l.Data = []T{}
	}
	if len(items) > limit {
		l.Data = items[:limit]
		l.HasMore = true
		l.NextAfter = id(&l.Data[limit-1])
	}
	return l
}

// deleted is the body of a successful DELETE of a project or customer.
type deleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// maxCacheTTL bounds a project's cache TTL, as x-gatehouse-cache-ttl is
// bounded: a year.
const maxCacheTTL = 365 * 24 * 3600

// setProjectCache sets a project's cache override: null (follow the
// config), true or false (the exact cache on or off), or
// {"exact": {"enabled": true|false|null, "ttl_seconds": N|null},
// "semantic": {"enabled": true|false|null, "threshold": X|null}}. The
// whole override is replaced.
func setProjectCache(dst **auth.ProjectCache, v json.RawMessage) error {
	if isNull(v) {
		*dst = nil
		return nil
	}
	c := &auth.ProjectCache{}
	var on bool
	if setBool(&on, v) == nil {
		c.Exact.Enabled = &on
		*dst = c
		return nil
	}
	var obj map[string]json.RawMessage
	if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &obj) != nil {
		return wrongType(`null, a boolean or an object {"exact": {…}, "semantic": {…}}`, v)
	}
	for name, raw := range obj {
		switch name {
		case "exact":
			if err := setExactOverride(&c.Exact, raw); err != nil {
				return fmt.Errorf("exact: %w", err)
			}
		case "semantic":
			if err := setSemanticOverride(&c.Semantic, raw); err != nil {
				return fmt.Errorf("semantic: %w", err)
			}
		default:
			return fmt.Errorf("unknown field %q (exact and semantic are the ones there are)", name)
		}
	}
	if c.IsZero() {
		c = nil
	}
	*dst = c
	return nil
}

func setExactOverride(dst *auth.ExactCacheOverride, v json.RawMessage) error {
	if isNull(v) {
		*dst = auth.ExactCacheOverride{}
		return nil
	}
	var obj map[string]json.RawMessage
	if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &obj) != nil {
		return wrongType(`an object {"enabled", "ttl_seconds"}`, v)
	}
	for name, raw := range obj {
		switch name {
		case "enabled":
			if err := setOptBool(&dst.Enabled, raw); err != nil {
				return fmt.Errorf("enabled: %w", err)
			}
		case "ttl_seconds":
			if err := setCount(&dst.TTLSeconds, raw); err != nil {
				return fmt.Errorf("ttl_seconds: %w", err)
			}
			if dst.TTLSeconds > maxCacheTTL {
				return fmt.Errorf("ttl_seconds: must be at most %d (a year)", maxCacheTTL)
			}
		default:
			return fmt.Errorf("unknown field %q (enabled and ttl_seconds are the ones there are)", name)
		}
	}
	return nil
}

func setSemanticOverride(dst *auth.SemanticCacheOverride, v json.RawMessage) error {
	if isNull(v) {
		*dst = auth.SemanticCacheOverride{}
		return nil
	}
	var obj map[string]json.RawMessage
	if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &obj) != nil {
		return wrongType(`an object {"enabled", "threshold"}`, v)
	}
	for name, raw := range obj {
		switch name {
		case "enabled":
			if err := setOptBool(&dst.Enabled, raw); err != nil {
				return fmt.Errorf("enabled: %w", err)
			}
		case "threshold":
			if isNull(raw) {
				dst.Threshold = 0
				continue
			}
			var t float64
			if err := json.Unmarshal(raw, &t); err != nil || !(t > 0 && t <= 1) {
				return errors.New("threshold: must be a cosine above 0 and at most 1")
			}
			dst.Threshold = t
		default:
			return fmt.Errorf("unknown field %q (enabled and threshold are the ones there are)", name)
		}
	}
	return nil
}
