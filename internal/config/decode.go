package config

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// The decoder walks the YAML syntax tree into the Config structs itself,
// rather than through the YAML library's decoder, for three reasons: it
// keeps going after a problem (every unknown field and wrong type is
// reported, not just the first), it records where each field path sits in
// the file (semantic checks report the line of the offending node), and
// its messages never quote a secret.

type pos struct{ line, col int }

type decoder struct {
	pm      *posMap
	errs    []FieldError
	at      map[string]pos      // field path → position of its value, null or not
	set     map[string]bool     // field paths with a non-null value
	bad     map[string]bool     // field paths whose value could not be decoded
	anchors map[string]ast.Node // anchor name → node, for aliases

	// budget bounds the values decoded, so aliases and merge keys cannot
	// blow a small file up into an enormous config ("billion laughs").
	budget     int
	mergeDepth int
}

const (
	maxValues     = 100_000
	maxMergeDepth = 8
)

func newDecoder(pm *posMap) *decoder {
	return &decoder{
		pm: pm, at: map[string]pos{}, set: map[string]bool{}, bad: map[string]bool{},
		anchors: map[string]ast.Node{}, budget: maxValues,
	}
}

// position is where n sits in the file. A block mapping's own token is the
// first ':', so it is placed at its first key instead.
func (d *decoder) position(n ast.Node) pos {
	switch v := n.(type) {
	case *ast.MappingNode:
		if !v.IsFlowStyle && len(v.Values) > 0 {
			return d.position(v.Values[0].Key)
		}
	case *ast.MappingValueNode:
		return d.position(v.Key)
	case *ast.LiteralNode:
		return d.tokenPos(v.Start)
	}
	return d.tokenPos(n.GetToken())
}

func (d *decoder) tokenPos(tk *token.Token) pos {
	if tk == nil || tk.Position == nil {
		return pos{}
	}
	line, col := d.pm.source(tk.Position.Line, max(tk.Position.Column, 1))
	return pos{line, col}
}

func (d *decoder) errorAt(p pos, field, format string, args ...any) {
	d.errs = append(d.errs, FieldError{Line: p.line, Column: p.col, Field: field, Message: fmt.Sprintf(format, args...)})
}

// fail reports that the value at path has the wrong shape or type.
func (d *decoder) fail(path string, n ast.Node, format string, args ...any) {
	d.bad[path] = true
	d.errorAt(d.position(n), path, format, args...)
}

// collectAnchors records every anchor so aliases can be resolved wherever
// they point.
func (d *decoder) collectAnchors(n ast.Node) {
	ast.Walk(anchorVisitor{d}, n)
}

type anchorVisitor struct{ d *decoder }

func (v anchorVisitor) Visit(n ast.Node) ast.Visitor {
	if a, ok := n.(*ast.AnchorNode); ok && a.Name != nil && a.Name.GetToken() != nil {
		v.d.anchors[a.Name.GetToken().Value] = a.Value
	}
	return v
}

// resolve looks through anchors, aliases and tags to the node with the
// value. It returns nil for an alias to an unknown anchor.
func (d *decoder) resolve(n ast.Node) ast.Node {
	for range 32 { // bounds alias chains, which may loop
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		case *ast.AliasNode:
			if v.Value == nil || v.Value.GetToken() == nil {
				return nil
			}
			n = d.anchors[v.Value.GetToken().Value]
		case *ast.MappingKeyNode:
			n = v.Value
		default:
			return n
		}
		if n == nil {
			return nil
		}
	}
	return nil
}

// decode stores the YAML value n into v, recording n's position under path.
func (d *decoder) decode(path string, n ast.Node, v reflect.Value, tag reflect.StructTag) {
	if !d.spend(path, n) {
		return
	}
	if path != "" {
		d.at[path] = d.position(n)
	}
	r := d.resolve(n)
	if r == nil {
		d.fail(path, n, "alias to an unknown anchor")
		return
	}
	if _, null := r.(*ast.NullNode); null {
		return // leave the zero value: absent and null mean the same
	}
	d.set[path] = true
	switch {
	case v.Type() == reflect.TypeFor[Duration]():
		d.duration(path, r, v)
	case v.Kind() == reflect.Pointer:
		e := reflect.New(v.Type().Elem())
		d.decode(path, n, e.Elem(), tag)
		v.Set(e)
	case v.Kind() == reflect.Struct:
		d.structure(path, r, v)
	case v.Kind() == reflect.Slice:
		d.sequence(path, r, v)
	case v.Kind() == reflect.Map:
		d.mapping(path, r, v)
	case tag.Get("config") == "redis":
		d.redis(path, r, v)
	case v.Kind() == reflect.String:
		s, ok := scalarText(r)
		if !ok {
			d.fail(path, r, "expected a string, got %s", kindName(r))
			return
		}
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, ok := r.(*ast.BoolNode)
		if !ok {
			hint := ""
			if s, _ := scalarText(r); slices.Contains([]string{"yes", "no", "on", "off", "y", "n"}, strings.ToLower(s)) {
				hint = fmt.Sprintf(" (%q is a string in YAML 1.2)", s)
			}
			d.fail(path, r, "expected true or false, got %s%s", kindName(r), hint)
			return
		}
		v.SetBool(b.Value)
	case v.Kind() == reflect.Int || v.Kind() == reflect.Int64:
		d.integer(path, r, v, tag.Get("config") == "size")
	case v.Kind() == reflect.Float64:
		d.float(path, r, v)
	default:
		panic("config: no decoder for " + v.Type().String())
	}
}

// spend takes one value from the budget, reporting once when it runs out.
func (d *decoder) spend(path string, n ast.Node) bool {
	d.budget--
	if d.budget == -1 {
		d.fail(path, n, "the document expands to more than %d values (too many aliases?)", maxValues)
	}
	return d.budget >= 0
}

// entry is one key of a mapping, after merge keys are applied.
type entry struct {
	key   string
	knode ast.Node
	value ast.Node
}

// entries lists the keys of a mapping in file order. Keys pulled in by a
// merge key (<<: *defaults) come after, and only where not set directly.
func (d *decoder) entries(path string, n ast.Node) ([]entry, bool) {
	var values []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	default:
		return nil, false
	}
	var own, merged []entry
	for _, mv := range values {
		if _, ok := mv.Key.(*ast.MergeKeyNode); ok {
			merged = append(merged, d.mergeEntries(path, mv.Value)...)
			continue
		}
		k := d.resolve(mv.Key)
		s, ok := scalarText(k)
		if k == nil || !ok {
			d.errorAt(d.position(mv.Key), path, "mapping keys must be strings")
			continue
		}
		own = append(own, entry{key: s, knode: mv.Key, value: mv.Value})
	}
	seen := make(map[string]bool, len(own))
	for _, e := range own {
		seen[e.key] = true
	}
	for _, e := range merged {
		if !seen[e.key] {
			seen[e.key] = true
			own = append(own, e)
		}
	}
	return own, true
}

func (d *decoder) mergeEntries(path string, n ast.Node) []entry {
	if d.mergeDepth >= maxMergeDepth {
		d.errorAt(d.position(n), path, "merge keys (<<) nested more than %d deep", maxMergeDepth)
		return nil
	}
	d.mergeDepth++
	defer func() { d.mergeDepth-- }()
	if !d.spend(path, n) {
		return nil
	}
	r := d.resolve(n)
	if seq, ok := r.(*ast.SequenceNode); ok {
		var all []entry
		for _, item := range seq.Values {
			all = append(all, d.mergeEntries(path, item)...)
		}
		return all
	}
	es, ok := d.entries(path, r)
	if r == nil || !ok {
		d.errorAt(d.position(n), path, "a merge key (<<) needs a mapping or a list of mappings")
	}
	return es
}

func (d *decoder) structure(path string, n ast.Node, v reflect.Value) {
	es, ok := d.entries(path, n)
	if !ok {
		d.fail(path, n, "expected a mapping, got %s", kindName(n))
		return
	}
	t := v.Type()
	for _, e := range es {
		if path == "" && strings.HasPrefix(e.key, "x-") {
			continue // extension keys: a place for anchors, as in Compose files
		}
		i := fieldIndex(t, e.key)
		if i < 0 {
			msg := fmt.Sprintf("unknown field %q", e.key)
			if s := suggest(t, e.key); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			d.bad[join(path, e.key)] = true
			d.errorAt(d.position(e.knode), join(path, e.key), "%s", msg)
			continue
		}
		f := t.Field(i)
		d.decode(join(path, e.key), e.value, v.Field(i), f.Tag)
	}
}

func (d *decoder) sequence(path string, n ast.Node, v reflect.Value) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		d.fail(path, n, "expected a list, got %s", kindName(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
	for i, item := range seq.Values {
		d.decode(fmt.Sprintf("%s[%d]", path, i), item, s.Index(i), "")
	}
	v.Set(s)
}

func (d *decoder) mapping(path string, n ast.Node, v reflect.Value) {
	if v.Type().Key().Kind() != reflect.String {
		panic("config: map keys must be strings")
	}
	es, ok := d.entries(path, n)
	if !ok {
		d.fail(path, n, "expected a mapping, got %s", kindName(n))
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(es))
	for _, e := range es {
		ev := reflect.New(v.Type().Elem()).Elem()
		d.decode(join(path, e.key), e.value, ev, "")
		m.SetMapIndex(reflect.ValueOf(e.key), ev)
	}
	v.Set(m)
}

func (d *decoder) duration(path string, n ast.Node, v reflect.Value) {
	if i, ok := n.(*ast.IntegerNode); ok && i.GetToken().Value == "0" {
		v.SetInt(0)
		return
	}
	s, ok := n.(*ast.StringNode)
	if !ok {
		d.fail(path, n, "expected a duration with a unit, such as 30s or 1m30s, got %s", kindName(n))
		return
	}
	dur, err := parseDuration(s.Value)
	if err != nil {
		d.fail(path, n, "invalid duration %q: want a number with a unit, such as 30s, 1m30s or 90d", s.Value)
		return
	}
	v.SetInt(int64(dur))
}

func (d *decoder) integer(path string, n ast.Node, v reflect.Value, size bool) {
	switch x := n.(type) {
	case *ast.IntegerNode:
		var i int64
		ok := true
		switch n := x.Value.(type) {
		case int64:
			i = n
		case uint64:
			i, ok = int64(n), n <= math.MaxInt64
		default:
			ok = false
		}
		if !ok || v.OverflowInt(i) {
			d.fail(path, n, "integer %s is out of range", x.GetToken().Value)
			return
		}
		v.SetInt(i)
		return
	case *ast.StringNode:
		if size {
			b, err := parseSize(x.Value)
			if err != nil {
				d.fail(path, n, "%v", err)
				return
			}
			v.SetInt(b)
			return
		}
	}
	if size {
		d.fail(path, n, "expected a size such as 10MiB or 512KB, got %s", kindName(n))
		return
	}
	d.fail(path, n, "expected an integer, got %s", kindName(n))
}

func (d *decoder) float(path string, n ast.Node, v reflect.Value) {
	var f float64
	switch x := n.(type) {
	case *ast.IntegerNode:
		switch i := x.Value.(type) {
		case int64:
			f = float64(i)
		case uint64:
			f = float64(i)
		}
	case *ast.FloatNode:
		f = x.Value
	case *ast.InfinityNode, *ast.NanNode:
		f = math.NaN()
	case *ast.StringNode: // the parser reads 1e-3 as a string
		p, err := strconv.ParseFloat(x.Value, 64)
		if err != nil || x.GetToken().Type != token.StringType {
			d.fail(path, n, "expected a number, got %s", kindName(n))
			return
		}
		f = p
	default:
		d.fail(path, n, "expected a number, got %s", kindName(n))
		return
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		d.fail(path, n, "must be a finite number")
		return
	}
	v.SetFloat(f)
}

// parseSize reads a byte count with an optional unit: B, KB/MB/GB (powers
// of 1000) or KiB/MiB/GiB (powers of 1024), case-insensitive.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"kb": 1e3, "mb": 1e6, "gb": 1e9,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
	}[strings.ToLower(unit)]
	f, err := strconv.ParseFloat(num, 64)
	if mult == 0 || err != nil {
		return 0, fmt.Errorf("invalid size %q: want a number with an optional unit (B, KB, MB, GB, KiB, MiB, GiB)", s)
	}
	b := f * mult
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(b), nil
}

// scalarText is a scalar's text. Numbers and booleans give their text as
// written, so `name: 2024` is the string "2024".
func scalarText(n ast.Node) (string, bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		if v.Value == nil {
			return "", true
		}
		return v.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return v.GetToken().Value, true
	}
	return "", false
}

func kindName(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	}
	return "an unsupported value"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldIndex finds the struct field whose yaml tag is name.
func fieldIndex(t reflect.Type, name string) int {
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag == name && tag != "" {
			return i
		}
	}
	return -1
}

// suggest returns the field of t closest to a misspelt key, if one is close.
func suggest(t reflect.Type, key string) string {
	best, bestDist := "", 3
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag == "" {
			continue
		}
		if d := editDistance(strings.ToLower(key), tag); d < bestDist {
			best, bestDist = tag, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
