// Command gatehouse is the LLM gateway. It is the only composition root:
// flags and config in, stores and providers built, everything wired, then
// served.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/alecthomas/kong"

	"gatehouse/internal/config"
)

// version and commit are stamped by the builds people download from:
//
//	go build -ldflags "-X main.version=v1.2.0 -X main.commit=$(git rev-parse HEAD)"
//
// (make build, scripts/build and scripts/release do). A plain go build or
// go install leaves them empty, and currentVersion fills in what the go
// command recorded instead. They are never written at run time.
var (
	version string
	commit  string
)

type cli struct {
	Serve  serveCmd  `cmd:"" help:"Run the gateway."`
	Config configCmd `cmd:"" help:"Work with config files."`

	Keys      keysCmd      `cmd:"" help:"Manage virtual keys through a running gateway's admin API."`
	Projects  projectsCmd  `cmd:"" help:"Manage projects through a running gateway's admin API."`
	Customers customersCmd `cmd:"" help:"Manage customers through a running gateway's admin API."`
	Prices    pricesCmd    `cmd:"" help:"Manage price overrides through a running gateway's admin API."`
	Usage     usageCmd     `cmd:"" help:"Requests, tokens and cost from the usage records, grouped and bucketed."`
	Logs      logsCmd      `cmd:"" help:"The usage records of single requests, newest first."`
	Cache     cacheCmd     `cmd:"" help:"Manage the response cache through a running gateway's admin API."`
	Models    modelsCmd    `cmd:"" help:"The live routing state of the models a running gateway serves."`

	Healthcheck healthcheckCmd `cmd:"" help:"Exit 0 when a gateway answers GET /healthz, 1 otherwise (for container health checks)."`
	Version     versionCmd     `cmd:"" help:"Print the version and commit."`

	VersionFlag kong.VersionFlag `name:"version" help:"Print the version and commit, and exit."`
}

type serveCmd struct {
	Config string `short:"c" env:"GATEHOUSE_CONFIG" required:"" type:"path" help:"Path to the YAML config file."`
	Bare   bool   `help:"Run as a bare proxy: no auth, limits or request logging (for benchmarks)."`

	CPUProfile string `name:"cpuprofile" type:"path" placeholder:"FILE" help:"Write a CPU profile (go tool pprof) of the process to FILE, from start until shutdown."`
}

type configCmd struct {
	Check checkCmd `cmd:"" help:"Validate a config file and report every error with its line and field."`
}

type checkCmd struct {
	File string `arg:"" type:"path" help:"Config file to check."`
}

type versionCmd struct{}

func (versionCmd) Run() error {
	fmt.Println(currentVersion())
	return nil
}

func (c *checkCmd) Run() error {
	cfg, err := config.Load(c.File, providerTypes())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return fmt.Errorf("%s is not valid", c.File)
	}
	fmt.Printf("%s: ok (%d providers, %d models, %d keys)\n", c.File, len(cfg.Providers), len(cfg.Models), len(cfg.Keys))
	return nil
}

func (s *serveCmd) Run() (err error) {
	if s.CPUProfile != "" {
		stop, err := startCPUProfile(s.CPUProfile)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	return serve(s.Config, s.Bare)
}

func main() {
	var c cli
	ctx := kong.Parse(&c,
		kong.Name("gatehouse"),
		kong.Description("A self-hosted LLM gateway: one OpenAI-compatible endpoint in front of many providers."),
		kong.UsageOnError(),
		kong.Vars{"version": currentVersion().String()},
	)
	if err := ctx.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse:", err)
		os.Exit(1)
	}
}
