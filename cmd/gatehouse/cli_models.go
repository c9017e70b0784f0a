package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
)

// modelsCmd: gatehouse models list|get, the live routing state of the
// admin API (GET /admin/models). It reads; it changes nothing.
type modelsCmd struct {
	List modelsListCmd `cmd:"" help:"Every model served and the live state of its deployments: health, breaker, errors, latency, in flight."`
	Get  modelsGetCmd  `cmd:"" help:"One model's deployments and their live state."`
}

// routedModel is the part of the admin API's RoutingModel the table shows.
type routedModel struct {
	Model       string          `json:"model"`
	Strategy    string          `json:"strategy"`
	Mode        string          `json:"mode"`
	Discovered  bool            `json:"discovered"`
	Deployments []routedBackend `json:"deployments"`
}

type routedBackend struct {
	Provider      string `json:"provider"`
	Model         string `json:"model"`
	Weight        int    `json:"weight"`
	Allowed       bool   `json:"allowed"`
	Down          bool   `json:"down"`
	HealthChecked bool   `json:"health_checked"`
	Breaker       struct {
		State string     `json:"state"`
		Until *time.Time `json:"until"`
	} `json:"breaker"`
	CoolingUntil     *time.Time `json:"cooling_until"`
	LatencyMS        *float64   `json:"latency_ms"`
	Attempts         int        `json:"attempts"`
	Failures         int        `json:"failures"`
	ErrorRate        *float64   `json:"error_rate"`
	InFlightRequests int64      `json:"in_flight_requests"`
	InFlightTokens   int64      `json:"in_flight_tokens"`
}

type modelsListCmd struct {
	adminFlags `embed:""`
}

func (c *modelsListCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *modelsListCmd) run(ctx context.Context, w io.Writer) error {
	raw, err := c.call(ctx, http.MethodGet, "/admin/models", nil)
	if err != nil {
		return err
	}
	var page struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &page); err != nil || page.Data == nil {
		return fmt.Errorf("unexpected answer from /admin/models: %v", err)
	}
	if c.JSON {
		return printJSON(w, []byte(page.Data)) // the array, as every list --json prints
	}
	var models []routedModel
	if err := json.Unmarshal(page.Data, &models); err != nil {
		return fmt.Errorf("unexpected answer from /admin/models: %w", err)
	}
	return printModels(w, models)
}

type modelsGetCmd struct {
	adminFlags `embed:""`
	Model      string `arg:"" help:"The model as clients send it."`
}

func (c *modelsGetCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *modelsGetCmd) run(ctx context.Context, w io.Writer) error {
	raw, err := c.call(ctx, http.MethodGet, "/admin/models/"+url.PathEscape(c.Model), nil)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(w, raw)
	}
	var m routedModel
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("unexpected answer from /admin/models: %w", err)
	}
	return printModels(w, []routedModel{m})
}

// printModels shows one row per deployment, each naming its model so the
// lines can be grepped.
func printModels(w io.Writer, models []routedModel) error {
	cols := []column{
		{"MODEL", str("model")}, {"STRATEGY", str("strategy")}, {"PROVIDER", str("provider")}, {"UPSTREAM", str("upstream")},
		{"WEIGHT", str("weight")}, {"HEALTH", str("health")}, {"BREAKER", str("breaker")}, {"ERRORS", str("errors")},
		{"LATENCY", str("latency")}, {"IN FLIGHT", str("in_flight")},
	}
	var rows []map[string]any
	for _, m := range models {
		name, strategy := m.Model, m.Strategy
		if m.Discovered {
			name += " (discovered)"
		}
		if m.Mode != "" && m.Mode != "any" {
			strategy += "/" + m.Mode
		}
		for _, d := range m.Deployments {
			rows = append(rows, map[string]any{"model": name, "strategy": strategy, "provider": d.Provider, "upstream": d.Model,
				"weight": strconv.Itoa(d.Weight), "health": healthCell(d), "breaker": breakerCell(d), "errors": errorsCell(d),
				"latency": latencyCell(d), "in_flight": fmt.Sprintf("%d req, %d tok", d.InFlightRequests, d.InFlightTokens)})
		}
	}
	return printTable(w, cols, rows)
}

// healthCell is one word: excluded (the routing mode never picks it), down,
// up (its health check passes) or unchecked (it has none).
func healthCell(d routedBackend) string {
	switch {
	case !d.Allowed:
		return "excluded"
	case d.Down:
		return "down"
	case d.HealthChecked:
		return "up"
	}
	return "unchecked"
}

// breakerCell is the breaker's state, until when an open one stays open, and
// a Retry-After the deployment is cooling off.
func breakerCell(d routedBackend) string {
	s := d.Breaker.State
	if d.Breaker.Until != nil {
		s += " until " + d.Breaker.Until.Local().Format(time.TimeOnly)
	}
	if d.CoolingUntil != nil {
		s += ", retry-after until " + d.CoolingUntil.Local().Format(time.TimeOnly)
	}
	return s
}

// errorsCell is failures/attempts over the breaker's window; "" (shown as
// "-") without an attempt in it.
func errorsCell(d routedBackend) string {
	if d.ErrorRate == nil {
		return ""
	}
	return fmt.Sprintf("%d/%d (%s%%)", d.Failures, d.Attempts, strconv.FormatFloat(*d.ErrorRate*100, 'f', 0, 64))
}

func latencyCell(d routedBackend) string {
	if d.LatencyMS == nil {
		return ""
	}
	return strconv.FormatFloat(*d.LatencyMS, 'f', 1, 64) + "ms"
}
