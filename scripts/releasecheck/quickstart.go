package main

import (
	"errors"
	"strings"
)

// quickstart returns the first ```go block of the "## Quick start"
// section of a README, which must be a complete package main.
func quickstart(readme string) (string, error) {
	_, section, ok := strings.Cut("\n"+readme, "\n## Quick start\n")
	if !ok {
		return "", errors.New(`no "## Quick start" section`)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var (
		code strings.Builder
		in   bool
	)
	for _, line := range strings.SplitAfter(section, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```go":
			in = true
		case in && trimmed == "```":
			if !isMain(code.String()) {
				return "", errors.New("the Quick start's first Go block is not a complete package main")
			}
			return code.String(), nil
		case in:
			code.WriteString(line)
		}
	}
	return "", errors.New("the Quick start section has no closed ```go block")
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
