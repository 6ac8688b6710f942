module github.com/samsa-go/samsa/scripts/releasecheck

go 1.26.0
