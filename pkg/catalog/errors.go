package catalog

import (
	"errors"
	"fmt"
	"strings"
)

// InvalidCatalogError means a catalog file cannot be used as written. It names
// the instance type (index and name) and the field, so the file can be fixed.
type InvalidCatalogError struct {
	// Source is the file path, or "catalog" for bytes given to Parse.
	Source string
	// Index is the position in instanceTypes, or -1 for a top-level field.
	Index int
	Name  string
	Field string
	Msg   string
}

func (e *InvalidCatalogError) Error() string {
	var msg strings.Builder
	msg.WriteString(e.Source)
	msg.WriteString(": ")
	if e.Index >= 0 {
		fmt.Fprintf(&msg, "instanceTypes[%d]", e.Index)
		if e.Name != "" {
			fmt.Fprintf(&msg, " (%s)", e.Name)
		}
		if e.Field != "" {
			msg.WriteString(".")
		}
	}
	msg.WriteString(e.Field)
	msg.WriteString(": ")
	msg.WriteString(e.Msg)
	return msg.String()
}

// NewInvalidCatalogError builds an InvalidCatalogError; index -1 means a
// top-level field.
func NewInvalidCatalogError(source string, index int, name, field, format string, args ...any) error {
	return &InvalidCatalogError{Source: source, Index: index, Name: name, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// IsInvalidCatalog reports whether err is, or wraps, an InvalidCatalogError.
func IsInvalidCatalog(err error) bool {
	var invalid *InvalidCatalogError
	return errors.As(err, &invalid)
}

// UnknownRegionError means the embedded catalog has no prices for a region.
type UnknownRegionError struct {
	Region string
	// Known lists a few regions the catalog does have, to spot typos.
	Known []string
}

func (e *UnknownRegionError) Error() string {
	return fmt.Sprintf("region %q is not in the embedded catalog; use an ARM location name such as %s, or load your own catalog file",
		e.Region, strings.Join(e.Known, ", "))
}

// NewUnknownRegionError builds an UnknownRegionError.
func NewUnknownRegionError(region string, known []string) error {
	return &UnknownRegionError{Region: region, Known: known}
}

// IsUnknownRegion reports whether err is, or wraps, an UnknownRegionError.
func IsUnknownRegion(err error) bool {
	var unknown *UnknownRegionError
	return errors.As(err, &unknown)
}
