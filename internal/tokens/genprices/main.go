// Command genprices writes gatehouse's embedded price catalog
// (internal/tokens/prices.json) from LiteLLM's model price dataset
// (model_prices_and_context_window_backup.json, MIT), keeping the chat,
// responses and embedding models of the providers gatehouse speaks to:
// input, cached-input and output prices and the context window. A dated
// snapshot ("claude-sonnet-4-20250514") or a "-latest" alias also prices
// its family ("claude-sonnet-4") unless the dataset prices that itself.
// Models the previous catalog had and the dataset no longer lists keep
// their last known price, so a retired model's spend is still counted.
// scripts/prices fetches the dataset at a pinned version and runs it
// (make prices).
//
//	go run ./internal/tokens/genprices -in FILE -version 1.106.2 -date 2026-11-24 -out internal/tokens/prices.json
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"

	"gatehouse/internal/tokens"
)

// providers are the dataset's litellm_provider values gatehouse serves,
// most authoritative first: a model id several of them list (gpt-4o at
// OpenAI, Azure and OpenRouter) takes the first one's price.
var providers = []string{"openai", "anthropic", "gemini", "deepseek", "xai", "mistral", "groq", "together_ai",
	"fireworks_ai", "bedrock_converse", "bedrock", "azure", "openrouter"}

type entry struct {
	Provider        string   `json:"litellm_provider"`
	Mode            string   `json:"mode"`
	Input           *float64 `json:"input_cost_per_token"`
	Output          *float64 `json:"output_cost_per_token"`
	CacheRead       *float64 `json:"cache_read_input_token_cost"`
	MaxInputTokens  *float64 `json:"max_input_tokens"`
	MaxTokens       *float64 `json:"max_tokens"`
	DeprecationDate string   `json:"deprecation_date"`
}

// model is one catalog entry: USD per million tokens, and the context
// window in tokens (0: unknown).
type model struct {
	Input   float64 `json:"input"`
	Cached  float64 `json:"cached,omitempty"`
	Output  float64 `json:"output"`
	Context int     `json:"context,omitempty"`
}

type catalog struct {
	AsOf   string           `json:"as_of"`
	Source string           `json:"source"`
	Note   string           `json:"note"`
	Models map[string]model `json:"models"`
}

func main() {
	in := flag.String("in", "", "LiteLLM's model_prices_and_context_window_backup.json")
	out := flag.String("out", "internal/tokens/prices.json", "the catalog to write")
	version := flag.String("version", "", "the LiteLLM version the dataset comes from")
	date := flag.String("date", "", "the date the catalog is made (YYYY-MM-DD)")
	previous := flag.String("previous", "", "the catalog being replaced, whose models the dataset lacks are kept (default: -out)")
	flag.Parse()
	if *previous == "" {
		*previous = *out
	}
	if *in == "" || *version == "" || *date == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*in, *out, *previous, *version, *date); err != nil {
		fmt.Fprintln(os.Stderr, "genprices:", err)
		os.Exit(1)
	}
}

func run(in, out, previous, version, date string) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	rank := map[string]int{}
	for i, p := range providers {
		rank[p] = i + 1
	}
	type pick struct {
		m     model
		rank  int
		plain bool // the dataset's key has no path (not a regional or routed variant)
		key   string
	}
	best := map[string]pick{}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys) // a stable choice among equals
	for _, k := range keys {
		var e entry
		if json.Unmarshal(all[k], &e) != nil || rank[e.Provider] == 0 || (e.Mode != "chat" && e.Mode != "embedding" && e.Mode != "responses") ||
			e.Input == nil || e.Output == nil {
			continue
		}
		m := model{Input: perMillion(*e.Input), Output: perMillion(*e.Output)}
		if e.CacheRead != nil && *e.CacheRead > 0 && perMillion(*e.CacheRead) != m.Input {
			m.Cached = perMillion(*e.CacheRead)
		}
		if e.MaxInputTokens != nil {
			m.Context = int(*e.MaxInputTokens)
		} else if e.MaxTokens != nil {
			m.Context = int(*e.MaxTokens)
		}
		id := tokens.Normalise(k)
		p := pick{m: m, rank: rank[e.Provider], plain: !strings.Contains(k, "/") || strings.Count(k, "/") == 1 && strings.HasPrefix(k, e.Provider+"/"), key: k}
		if cur, ok := best[id]; ok && (cur.rank < p.rank || cur.rank == p.rank && (cur.plain || !p.plain)) {
			continue
		}
		best[id] = p
	}
	c := catalog{
		AsOf:   date,
		Source: "LiteLLM " + version + ", litellm/model_prices_and_context_window_backup.json (MIT), regenerated with make prices",
		Note: "USD per 1M tokens (input, cached input = prompt-cache read, output) and the context window (input tokens), " +
			"by model id as gatehouse normalises it; when several providers list an id, the first of " + strings.Join(providers, ", ") +
			" wins. Override per model in the config or the admin API.",
		Models: map[string]model{},
	}
	for id, p := range best {
		c.Models[id] = p.m
	}
	// Families: the newest snapshot of a family prices its bare name.
	families := map[string]string{} // family → the snapshot id chosen
	for id := range best {
		fam, ok := tokens.Family(id)
		if !ok {
			continue
		}
		if _, priced := best[fam]; priced {
			continue
		}
		if cur, ok := families[fam]; !ok || id > cur {
			families[fam] = id
		}
	}
	for fam, id := range families {
		c.Models[fam] = best[id].m
	}
	kept := 0
	if old, err := os.ReadFile(previous); err == nil {
		var prev catalog
		if err := json.Unmarshal(old, &prev); err != nil {
			return fmt.Errorf("%s: %w", previous, err)
		}
		for id, m := range prev.Models {
			if _, ok := c.Models[id]; !ok {
				c.Models[id] = m
				kept++
			}
		}
	}
	fmt.Fprintf(os.Stderr, "genprices: %d families from snapshots, %d models kept from %s\n", len(families), kept, previous)
	b, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "genprices: %d models from %d dataset entries -> %s\n", len(c.Models), len(all), out)
	return nil
}

// perMillion turns USD per token into USD per million tokens, rounded to
// the micro-dollar the catalog keeps.
func perMillion(perToken float64) float64 { return math.Round(perToken*1e12) / 1e6 }
