package main

import (
	"errors"
	"strings"
)

// quickstart returns the first ```go block of the "## Quick start"
// section of a README, which must be a complete package main, and the
// README's line of the block's first line.
func quickstart(readme string) (string, int, error) {
	head, section, ok := strings.Cut("\n"+readme, "\n## Quick start\n")
	if !ok {
		return "", 0, errors.New(`no "## Quick start" section`)
	}
	line := strings.Count(head, "\n") + 1 // the heading's line, 1-based
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var (
		code strings.Builder
		in   bool
	)
	start := 0
	for _, text := range strings.SplitAfter(section, "\n") {
		line++
		trimmed := strings.TrimSpace(text)
		switch {
		case !in && trimmed == "```go":
			in, start = true, line+1
		case in && trimmed == "```":
			if !isMain(code.String()) {
				return "", 0, errors.New("the Quick start's first Go block is not a complete package main")
			}
			return code.String(), start, nil
		case in:
			code.WriteString(text)
		}
	}
	return "", 0, errors.New("the Quick start section has no closed ```go block")
}

// isMain reports whether code's package clause, after any comments, is
// package main.
func isMain(code string) bool {
	for _, line := range strings.Split(code, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		return line == "package main"
	}
	return false
}
