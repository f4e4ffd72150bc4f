package catalog

//go:generate go run ./internal/gen -out data/catalog.json.gz
