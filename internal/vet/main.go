// Command vet is go vet's suite of analyzers (cmd/vet's, in its order),
// run by `make lint` as `go vet -vettool`. It differs from go vet in one
// thing: a package from outside this module and the standard library,
// vetted only for the facts its importers use, computes none.
//
// go vet parses and type-checks every dependency from source to compute
// its facts: some two thousand packages here, the Temporal server and
// Google's 240,000-line Compute Engine client among them, which made it
// the slowest step of `make test`. Those facts serve checks of calls into
// third-party code: a printf-like wrapper such a package defines, a
// function of it that never returns. Diagnostics on refuel's own packages
// are go vet's, with the facts of refuel's packages and of the standard
// library (fmt, log, testing, os.Exit) as go vet has them.
package main

import (
	"encoding/json"
	"os"
	"strings"

	"golang.org/x/tools/go/analysis/passes/appends"
	"golang.org/x/tools/go/analysis/passes/asmdecl"
	"golang.org/x/tools/go/analysis/passes/assign"
	"golang.org/x/tools/go/analysis/passes/atomic"
	"golang.org/x/tools/go/analysis/passes/bools"
	"golang.org/x/tools/go/analysis/passes/buildtag"
	"golang.org/x/tools/go/analysis/passes/cgocall"
	"golang.org/x/tools/go/analysis/passes/composite"
	"golang.org/x/tools/go/analysis/passes/copylock"
	"golang.org/x/tools/go/analysis/passes/defers"
	"golang.org/x/tools/go/analysis/passes/directive"
	"golang.org/x/tools/go/analysis/passes/errorsas"
	"golang.org/x/tools/go/analysis/passes/framepointer"
	"golang.org/x/tools/go/analysis/passes/hostport"
	"golang.org/x/tools/go/analysis/passes/httpresponse"
	"golang.org/x/tools/go/analysis/passes/ifaceassert"
	"golang.org/x/tools/go/analysis/passes/loopclosure"
	"golang.org/x/tools/go/analysis/passes/lostcancel"
	"golang.org/x/tools/go/analysis/passes/nilfunc"
	"golang.org/x/tools/go/analysis/passes/printf"
	"golang.org/x/tools/go/analysis/passes/shift"
	"golang.org/x/tools/go/analysis/passes/sigchanyzer"
	"golang.org/x/tools/go/analysis/passes/slog"
	"golang.org/x/tools/go/analysis/passes/stdmethods"
	"golang.org/x/tools/go/analysis/passes/stdversion"
	"golang.org/x/tools/go/analysis/passes/stringintconv"
	"golang.org/x/tools/go/analysis/passes/structtag"
	"golang.org/x/tools/go/analysis/passes/testinggoroutine"
	"golang.org/x/tools/go/analysis/passes/tests"
	"golang.org/x/tools/go/analysis/passes/timeformat"
	"golang.org/x/tools/go/analysis/passes/unmarshal"
	"golang.org/x/tools/go/analysis/passes/unreachable"
	"golang.org/x/tools/go/analysis/passes/unsafeptr"
	"golang.org/x/tools/go/analysis/passes/unusedresult"
	"golang.org/x/tools/go/analysis/passes/waitgroup"
	"golang.org/x/tools/go/analysis/unitchecker"
)

// module is the import path of this module's packages.
const module = "refuel"

func main() {
	if cfg, ok := config(os.Args[1:]); ok && cfg.VetxOnly && !ours(cfg) {
		// A third-party dependency: no facts, an empty file for them.
		if err := os.WriteFile(cfg.VetxOutput, nil, 0o666); err != nil {
			os.Stderr.WriteString("vet: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	unitchecker.Main(
		appends.Analyzer, asmdecl.Analyzer, assign.Analyzer, atomic.Analyzer, bools.Analyzer,
		buildtag.Analyzer, cgocall.Analyzer, composite.Analyzer, copylock.Analyzer, defers.Analyzer,
		directive.Analyzer, errorsas.Analyzer, framepointer.Analyzer, httpresponse.Analyzer,
		hostport.Analyzer, ifaceassert.Analyzer, loopclosure.Analyzer, lostcancel.Analyzer,
		nilfunc.Analyzer, printf.Analyzer, shift.Analyzer, sigchanyzer.Analyzer, slog.Analyzer,
		stdmethods.Analyzer, stdversion.Analyzer, stringintconv.Analyzer, structtag.Analyzer,
		tests.Analyzer, testinggoroutine.Analyzer, timeformat.Analyzer, unmarshal.Analyzer,
		unreachable.Analyzer, unsafeptr.Analyzer, unusedresult.Analyzer, waitgroup.Analyzer,
	)
}

// vetConfig is the part of the configuration go vet hands its tool that
// says what is asked.
type vetConfig struct {
	ImportPath string
	VetxOnly   bool
	VetxOutput string
}

// config reads the configuration file go vet names as the last argument
// (a .cfg file); ok is false for any other call (-flags, -V=full).
func config(args []string) (vetConfig, bool) {
	var cfg vetConfig
	if len(args) == 0 || !strings.HasSuffix(args[len(args)-1], ".cfg") {
		return cfg, false
	}
	data, err := os.ReadFile(args[len(args)-1])
	if err != nil || json.Unmarshal(data, &cfg) != nil {
		return cfg, false
	}
	return cfg, true
}

// ours reports whether the package is this module's or the standard
// library's, whose facts refuel's packages use.
func ours(cfg vetConfig) bool {
	path, _, _ := strings.Cut(cfg.ImportPath, " ") // "p [p.test]"
	first, _, _ := strings.Cut(path, "/")
	return path == module || strings.HasPrefix(path, module+"/") || !strings.Contains(first, ".")
}
