package main

import (
	"os"
	"strings"
	"testing"
)

func TestAutoscaleBenchDev(t *testing.T) {
	args := os.Getenv("ASB_ARGS")
	if args == "" {
		t.Skip()
	}
	if err := runAutoscaleBench(strings.Fields(args), os.Stdout); err != nil {
		t.Fatal(err)
	}
}
