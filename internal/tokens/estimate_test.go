package tokens

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gatehouse/internal/llm"
)

// The corpus is written for this test: each sample stands for a kind of
// prompt gateways see.
const prose = `The ferry leaves the harbour at seven, when the light is still grey and
the gulls have not yet decided whether the day is worth their trouble. Most
passengers are regulars: a baker carrying two crates of rolls, a nurse
finishing a night shift, three students who argue about a thermodynamics
problem they were supposed to solve yesterday. Nobody looks at the water.
The crossing takes forty minutes, long enough to read a chapter or to fall
asleep against the window, and the engine's steady vibration makes the
second option hard to resist.

On the far side, the town climbs a hill in uneven terraces. The streets were
laid out before anyone owned a car, so delivery vans reverse through alleys
with inches to spare while shopkeepers shout directions that contradict each
other. It is an inefficient, charming, occasionally infuriating arrangement,
and the people who live there would not trade it for anything. When the
council proposed widening the main road, the public meeting lasted until
midnight and ended with the proposal withdrawn and the mayor buying coffee
for everyone who had stayed.

Internationalization of the town's tourist leaflets, meanwhile, has been
"in progress" for eleven years. Characteristically, the committee responsible
meets quarterly, approves the translations unanimously, and then discovers
that the printer has misplaced the files again.`

const code = `package cache

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrMiss is returned by Get when the key is absent or expired.
var ErrMiss = errors.New("cache: miss")

type entry struct {
	value   []byte
	expires time.Time
}

// LRU is a size-bounded cache with per-entry expiry.
type LRU struct {
	mu      sync.Mutex
	maxSize int
	items   map[string]*entry
	order   []string
}

func NewLRU(maxSize int) *LRU {
	return &LRU{maxSize: maxSize, items: make(map[string]*entry, maxSize)}
}

func (c *LRU) Get(ctx context.Context, key string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok || time.Now().After(e.expires) {
		return nil, ErrMiss
	}
	return e.value, nil
}

def summarize(rows, *, key="total", limit=10):
    """Return the top rows by key, largest first."""
    ranked = sorted(rows, key=lambda r: r.get(key, 0), reverse=True)
    for i, row in enumerate(ranked[:limit]):
        print(f"{i + 1:>3}. {row['name']:<20} {row[key]:>10.2f}")
    return ranked[:limit]

if __name__ == "__main__":
    data = [{"name": "alpha", "total": 12.5}, {"name": "beta", "total": 7.25}]
    summarize(data, limit=2)
`

const russian = `Паром отходит от пристани в семь утра, когда свет ещё серый, а чайки не
решили, стоит ли день их внимания. Большинство пассажиров — постоянные: пекарь
с двумя ящиками булочек, медсестра после ночной смены и трое студентов, которые
спорят о задаче по термодинамике. Переправа длится сорок минут, достаточно,
чтобы прочитать главу или уснуть у окна. На другом берегу город поднимается по
холму неровными террасами, а улицы такие узкие, что фургоны с трудом проезжают
между домами. Жители любят этот беспорядок и не променяют его ни на что.`

const chinese = `渡轮每天早上七点离开港口，那时天色还是灰的，海鸥也还没决定这一天是否值得它们费心。
大多数乘客都是熟面孔：一个带着两箱面包的面包师，一个刚下夜班的护士，还有三个正在争论热力学题目的学生。
过海需要四十分钟，足够读完一章书，或者靠着窗户睡一觉。对岸的小镇沿着山坡一层层地往上建，
街道很窄，送货的车只能小心地倒着开进小巷。居民们很喜欢这种有点乱的生活，不愿意用任何东西来交换。
议会曾经提议拓宽主路，公开会议一直开到半夜，最后提案被撤回，镇长请所有留下来的人喝了咖啡。`

const japanese = `フェリーは朝七時に港を出ます。空はまだ灰色で、カモメたちはその日が面倒に値するかどうかをまだ決めていません。
乗客のほとんどは常連です。パンの箱を二つ抱えたパン屋さん、夜勤明けの看護師、そして昨日解くはずだった熱力学の問題について議論している三人の学生。
横断には四十分かかり、本を一章読むか、窓にもたれて眠るのにちょうどいい長さです。向こう岸の町は丘の上に段々と広がっています。`

const arabic = `تغادر العبارة الميناء في السابعة صباحا، عندما يكون الضوء ما زال رماديا. معظم الركاب من المعتادين:
خباز يحمل صندوقين من الخبز، وممرضة أنهت نوبة ليلية، وثلاثة طلاب يتجادلون حول مسألة في الديناميكا الحرارية.
يستغرق العبور أربعين دقيقة، وهو وقت كاف لقراءة فصل من كتاب أو للنوم بجانب النافذة. على الضفة الأخرى
تصعد البلدة التل في مدرجات غير منتظمة، والشوارع ضيقة جدا حتى إن شاحنات التوصيل تمر بصعوبة بين البيوت.`

const markdown = `## Release checklist ✅

1. Bump the version in ` + "`version.go`" + ` → v2.4.1
2. Run ` + "`make test bench`" + ` and paste the numbers below 📈
3. Tag: ` + "`git tag -s v2.4.1 -m \"v2.4.1\"`" + `

| metric       | before  | after   | Δ      |
|--------------|---------|---------|--------|
| p50 latency  | 1.82 ms | 1.64 ms | −9.9 % |
| p99 latency  | 7.10 ms | 6.95 ms | −2.1 % |
| allocations  | 41/op   | 33/op   | −19 %  |

> **Note:** the café's Wi-Fi blocks port 22 — use the HTTPS remote. 🙃
`

func corpus() map[string]string {
	rng := rand.New(rand.NewPCG(1, 2))
	type item struct {
		ID      int               `json:"id"`
		Name    string            `json:"name"`
		Price   float64           `json:"price"`
		Tags    []string          `json:"tags"`
		InStock bool              `json:"in_stock"`
		Attrs   map[string]string `json:"attrs"`
	}
	words := strings.Fields("red green blue large small heavy light steel oak cotton wool glass")
	var items []item
	for i := range 12 {
		items = append(items, item{ID: 1000 + i*37, Name: words[i%len(words)] + " " + words[(i*5+3)%len(words)] + " chair",
			Price: float64(rng.IntN(100000)) / 100, Tags: []string{words[i%3], words[(i+4)%len(words)]}, InStock: i%2 == 0,
			Attrs: map[string]string{"colour": words[i%3], "material": words[7+i%5]}})
	}
	js, _ := json.MarshalIndent(items, "", "  ")
	var nums strings.Builder
	nums.WriteString("date,station,temp_c,rain_mm,pressure_hpa\n")
	for i := range 40 {
		fmt.Fprintf(&nums, "2024-%02d-%02d,%d,%.1f,%.2f,%d\n", 1+i%12, 1+i%28, 10400+rng.IntN(900), rng.Float64()*40-10, rng.Float64()*30, 950+rng.IntN(100))
	}
	return map[string]string{
		"prose": prose, "code": code, "json": string(js), "numbers": nums.String(),
		"russian": russian, "chinese": chinese, "japanese": japanese, "arabic": arabic, "markdown": markdown,
	}
}

func TestEstimateAgainstCounter(t *testing.T) {
	c := New()
	total, totalEst := 0, 0
	for name, text := range corpus() {
		want := c.Count(text)
		got := EstimateText(text)
		total += want
		totalEst += got
		rel := float64(got-want) / float64(want)
		t.Logf("%-9s counter %5d  estimate %5d  error %+6.1f%%", name, want, got, 100*rel)
		if want < 120 {
			t.Errorf("%s: sample of %d tokens is too small for the bound", name, want)
		}
		if math.Abs(rel) > EstimateBound {
			t.Errorf("%s: estimate %d vs %d tokens: error %.1f%% beyond the bound of %.0f%%", name, got, want, 100*rel, 100*EstimateBound)
		}
		// The JSON-string path reads the same text through escapes.
		if js := stringTokens(llm.AppendQuote(nil, text)); js != got {
			t.Errorf("%s: estimate through JSON escapes %d, want %d", name, js, got)
		}
	}
	t.Logf("all       counter %5d  estimate %5d  error %+6.1f%%", total, totalEst, 100*float64(totalEst-total)/float64(total))
}

func TestEstimateShortTexts(t *testing.T) {
	c := New()
	for _, s := range []string{"", "hello", "Hello, world!", "The quick brown fox jumps over the lazy dog.",
		"What is 12345 + 678?", "fooBarBaz_qux", "   indented\n\n\tline", "naïve café"} {
		want, got := c.Count(s), EstimateText(s)
		if d := got - want; d < -3 || d > 3 {
			t.Errorf("EstimateText(%q) = %d, Counter %d", s, got, want)
		}
	}
}

func chatBody(t testing.TB, p *llm.ChatParams) *llm.ChatRequest {
	t.Helper()
	r, err := llm.NewChatRequest(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEstimateChat(t *testing.T) {
	c := New()
	text := func(s string) []llm.Part { return []llm.Part{{Type: llm.PartText, Text: s}} }
	cases := map[string]*llm.ChatParams{
		"plain": {Model: "m", Messages: []llm.Message{{Role: "system", Content: text("You are terse.")}, {Role: "user", Content: text(prose)}}},
		"image": {Model: "m", Messages: []llm.Message{{Role: "user", Content: []llm.Part{
			{Type: llm.PartText, Text: "What is in this picture?"}, {Type: llm.PartImageURL, ImageURL: "data:image/png;base64,AAAA"}}}}},
		"tools": {Model: "m", Messages: []llm.Message{
			{Role: "user", Content: text("Weather in Paris and in Zürich, please.")},
			{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{"city":"Paris","unit":"celsius"}`}}},
			{Role: "tool", ToolCallID: "c1", Content: text(`{"temp":21,"sky":"clear"}`)},
		}, Tools: []llm.Tool{{Name: "get_weather", Description: "Current weather for a city, by name.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}`)}}},
		"code": {Model: "m", Messages: []llm.Message{{Role: "user", Content: text("Review this:\n" + code)}}},
	}
	for name, p := range cases {
		r := chatBody(t, p)
		want := c.Chat(p)
		got := EstimateChat(r.Messages, r.Tools)
		rel := float64(got-want) / float64(want)
		t.Logf("%-6s Chat %5d  EstimateChat %5d  error %+6.1f%%", name, want, got, 100*rel)
		// Short prompts get absolute slack: a tool schema's JSON
		// punctuation alone moves them by a dozen tokens.
		if (want >= 120 && math.Abs(rel) > EstimateBound) || (want < 120 && math.Abs(float64(got-want)) > 20) {
			t.Errorf("%s: EstimateChat %d, Counter.Chat %d", name, got, want)
		}
	}
}

func TestEstimateInput(t *testing.T) {
	for in, want := range map[string]int{
		`"hello world"`:       2,
		`["hello", "world"]`:  2,
		`[1, 2, 3]`:           3,
		`[[1, 2], [3, 4, 5]]`: 5,
		`null`:                0,
	} {
		if got := EstimateInput([]byte(in)); got != want {
			t.Errorf("EstimateInput(%s) = %d, want %d", in, got, want)
		}
	}
}

func TestEstimateAllocatesNothing(t *testing.T) {
	r := chatBody(t, &llm.ChatParams{Model: "m", Messages: []llm.Message{{Role: "user", Content: []llm.Part{{Type: llm.PartText, Text: prose}}}}})
	if n := testing.AllocsPerRun(100, func() { EstimateChat(r.Messages, r.Tools) }); n != 0 {
		t.Errorf("EstimateChat allocates %.0f times", n)
	}
	if n := testing.AllocsPerRun(100, func() { EstimateText(chinese) }); n != 0 {
		t.Errorf("EstimateText allocates %.0f times", n)
	}
}

func FuzzEstimateChat(f *testing.F) {
	f.Add([]byte(`[{"role":"user","content":"hi \u00e9\ud83d\ude00 \"x\""}]`), []byte(`[{"type":"function"}]`))
	f.Add([]byte(`[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"}]}]`), []byte(nil))
	f.Fuzz(func(t *testing.T, messages, tools []byte) {
		if n := EstimateChat(messages, tools); n < ReplyPriming {
			t.Fatalf("estimate %d below the priming", n)
		}
		_ = EstimateInput(messages)
		_ = rawTokens(tools)
	})
}

// A 300-byte prompt, as in the request path's benchmarks.
var benchPrompt = prose[:300]

func BenchmarkEstimateChat(b *testing.B) {
	r := chatBody(b, &llm.ChatParams{Model: "m", Messages: []llm.Message{{Role: "user", Content: []llm.Part{{Type: llm.PartText, Text: benchPrompt}}}}})
	b.ReportAllocs()
	b.SetBytes(int64(len(r.Messages)))
	for b.Loop() {
		EstimateChat(r.Messages, r.Tools)
	}
}

func BenchmarkCounterChat(b *testing.B) {
	c := New()
	p := &llm.ChatParams{Model: "m", Messages: []llm.Message{{Role: "user", Content: []llm.Part{{Type: llm.PartText, Text: benchPrompt}}}}}
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPrompt)))
	for b.Loop() {
		c.Chat(p)
	}
}

func BenchmarkEstimateText(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPrompt)))
	for b.Loop() {
		EstimateText(benchPrompt)
	}
}

func BenchmarkCounterCount(b *testing.B) {
	c := New()
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPrompt)))
	for b.Loop() {
		c.Count(benchPrompt)
	}
}

// TestNameEnd: the walk's end of a member name is llm.StringEnd's, for
// plain names, escaped quotes and backslashes, names cut short (a
// trailing backslash among them) and a name followed by more JSON.
func TestNameEnd(t *testing.T) {
	for _, s := range []string{`"role":"user"`, `""`, `"a\"b":1`, `"a\\":2`, `"a\\\"":3,"b":4`, `"\u0041"`, `"cut`, `"cut\`, `"cut\"`, `"`, `"é😀":0`} {
		b := []byte(s)
		if got, want := nameEnd(b, 0), llm.StringEnd(b, 0); got != want {
			t.Errorf("nameEnd(%s) = %d, StringEnd %d", s, got, want)
		}
	}
}

// TestRoleTokens: the fixed estimates of the roles are the estimate's
// own, the index after each is the string's end, and a role spelled with
// an escape, a prefix of a known role or another role is left to the
// estimate.
func TestRoleTokens(t *testing.T) {
	for _, r := range []string{"user", "assistant", "system", "tool", "developer"} {
		b := []byte(`{"role":"` + r + `"}`)
		at := len(`{"role":`)
		n, end, ok := roleTokens(b, at)
		if want := stringTokens(b[at : at+len(r)+2]); !ok || n != want || end != at+len(r)+2 {
			t.Errorf("roleTokens(%s) = %d, %d, %v; want %d, %d, true", r, n, end, ok, want, at+len(r)+2)
		}
	}
	for _, raw := range []string{`"us\u0065r"`, `"use"`, `"users"`, `"critic"`, `"User"`, `"`} {
		if _, _, ok := roleTokens([]byte(raw), 0); ok {
			t.Errorf("roleTokens(%s) took it", raw)
		}
	}
}
