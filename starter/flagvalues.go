package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Flag values and completions any command may use: values whose mistakes
// say how to write them (pflag names the flag around them), lists given
// repeated or comma-separated, and completions of flag values from fixed
// words or from files.

// durationValue is a duration flag: "two days" is refused with an example.
type durationValue struct{ d *time.Duration }

func durationVar(fs *pflag.FlagSet, dst *time.Duration, name string, value time.Duration, usage string) {
	*dst = value
	fs.Var(durationValue{dst}, name, usage)
}

func (v durationValue) String() string { return shortDuration(*v.d) }
func (v durationValue) Type() string   { return "duration" }
func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a duration; write it like 48h, 90m or 30s", s)
	}
	*v.d = d
	return nil
}

// priceValue is a price in USD per hour, 0 or more.
type priceValue struct{ p *float64 }

func priceVar(fs *pflag.FlagSet, dst *float64, name string, value float64, usage string) {
	*dst = value
	fs.Var(priceValue{dst}, name, usage)
}

func (v priceValue) String() string { return strconv.FormatFloat(*v.p, 'f', -1, 64) }
func (v priceValue) Type() string   { return "usd" }
func (v priceValue) Set(s string) error {
	p, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || p < 0 {
		return fmt.Errorf("%q is not a price; write USD per hour such as 3.06", s)
	}
	*v.p = p
	return nil
}

// listValue is a flag given once with items separated by commas, or
// repeated: every item is read with parse, and the items add up in order.
// The default, if any, is replaced by the first item given.
type listValue[T any] struct {
	items   *[]T
	parse   func(string) ([]T, error)
	typ     string
	changed bool
}

func listVar[T any](fs *pflag.FlagSet, dst *[]T, name, typ string, parse func(string) ([]T, error), usage string) {
	fs.Var(&listValue[T]{items: dst, parse: parse, typ: typ}, name, usage)
}

func (v *listValue[T]) Type() string { return v.typ }
func (v *listValue[T]) String() string {
	var out []string
	for _, x := range *v.items {
		out = append(out, fmt.Sprint(x))
	}
	return strings.Join(out, ",")
}
func (v *listValue[T]) Set(s string) error {
	if !v.changed {
		*v.items, v.changed = nil, true
	}
	for _, item := range strings.Split(s, ",") {
		xs, err := v.parse(strings.TrimSpace(item))
		if err != nil {
			return err
		}
		*v.items = append(*v.items, xs...)
	}
	return nil
}

// one reads an item that stands for itself.
func one[T any](read func(string) (T, error)) func(string) ([]T, error) {
	return func(s string) ([]T, error) {
		x, err := read(s)
		if err != nil {
			return nil, err
		}
		return []T{x}, nil
	}
}

// positiveInt reads a whole number from 1.
func positiveInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q is not a count; give a whole number from 1", s)
	}
	return n, nil
}

// completeWords completes a flag's value from words; where the value is
// a comma-separated list, the item being written after the last comma.
func completeWords(words ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		done, item := "", toComplete
		if i := strings.LastIndex(toComplete, ","); i >= 0 {
			done, item = toComplete[:i+1], toComplete[i+1:]
		}
		var out []cobra.Completion
		for _, w := range words {
			if strings.HasPrefix(w, item) && !slices.Contains(strings.Split(done, ","), w) {
				out = append(out, done+w)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// completeFiles completes a flag's value with files of these extensions
// (no dot).
func completeFiles(exts ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return exts, cobra.ShellCompDirectiveFilterFileExt
	}
}

// completeDirs completes a flag's value with directories.
func completeDirs(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveFilterDirs
}

// completeNothing leaves a flag's value to be typed: a number, a time.
func completeNothing(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveNoFileComp
}
