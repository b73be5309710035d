package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// The configuration reference and the code agree (make docs-check): every
// key of a TOML example in docs/config.md (and the pages it sends the
// [model] and [preprocess] sections to) is one the code reads (Parse
// refuses unknown keys), and every key the code reads is shown in an
// example, under its table.
func TestConfigDocMatchesTheCode(t *testing.T) {
	var blocks [][]string
	for _, page := range []string{"config.md", "model.md", "preprocess.md"} {
		data, err := os.ReadFile("../../docs/" + page)
		if err != nil {
			t.Fatal(err)
		}
		found := regexp.MustCompile("(?s)```toml\n(.*?)```").FindAllStringSubmatch(string(data), -1)
		if len(found) == 0 {
			t.Fatalf("docs/%s has no ```toml example", page)
		}
		blocks = append(blocks, found...)
	}
	shown := map[string]bool{}
	keyLine := regexp.MustCompile(`^\s*([a-z_]+)\s*=`)
	table := regexp.MustCompile(`^\s*\[\[?([a-z_.]+)\]\]?`)
	for i, b := range blocks {
		if _, err := Parse(Default(), b[1], "docs/config.md example"); err != nil && strings.Contains(err.Error(), "unknown key") {
			t.Errorf("example %d: %v", i+1, err)
		}
		section := ""
		for _, l := range strings.Split(b[1], "\n") {
			if m := table.FindStringSubmatch(l); m != nil {
				section = m[1] + "."
			} else if m := keyLine.FindStringSubmatch(l); m != nil {
				shown[section+m[1]] = true
			}
		}
	}
	for _, k := range tomlKeys(reflect.TypeOf(Config{}), "") {
		if !shown[k] {
			t.Errorf("the code reads %s, which no example in docs/config.md shows", k)
		}
	}
}

// tomlKeys are the dotted keys of t's fields, tables and arrays of
// tables descended into.
func tomlKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.NumField() > 0 && ft.Field(0).Tag.Get("toml") != "" {
			keys = append(keys, tomlKeys(ft, prefix+name+".")...)
			continue
		}
		keys = append(keys, prefix+name)
	}
	return keys
}
