package catalog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/icehold/icehold/shared/store"
)

// NamespaceInfo is a namespace with its properties.
type NamespaceInfo struct {
	Namespace  []string          `json:"namespace"`
	Properties map[string]string `json:"properties"`
}

// PropertiesUpdate is the answer to a namespace properties change.
type PropertiesUpdate struct {
	Updated []string `json:"updated"`
	Removed []string `json:"removed"`
	Missing []string `json:"missing,omitempty"`
}

func nsName(levels []string) string { return strings.Join(levels, ".") }

// storeErr turns store errors into domain errors for a namespace operation.
func nsErr(op string, levels []string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%s namespace %s: %w", op, nsName(levels), ErrNoSuchNamespace)
	case errors.Is(err, store.ErrExists):
		return fmt.Errorf("%s namespace %s: %w", op, nsName(levels), ErrNamespaceExists)
	case errors.Is(err, store.ErrNotEmpty):
		return fmt.Errorf("%s namespace %s: %w", op, nsName(levels), ErrNamespaceNotEmpty)
	case errors.Is(err, store.ErrBadPageToken):
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return fmt.Errorf("%s namespace %s: %w", op, nsName(levels), err)
}

// CreateNamespace creates a namespace; a nested one needs its parent.
func (s *Service) CreateNamespace(ctx context.Context, cat string, levels []string, props map[string]string) (NamespaceInfo, error) {
	if err := ValidateNamespace(levels); err != nil {
		return NamespaceInfo{}, err
	}
	if _, err := s.catalog(ctx, cat); err != nil {
		return NamespaceInfo{}, err
	}
	if props == nil {
		props = map[string]string{}
	}
	if err := checkPropertyChange(props, nil); err != nil {
		return NamespaceInfo{}, err
	}
	err := s.store.CreateNamespace(ctx, cat, store.Namespace{Levels: levels, Properties: props})
	if errors.Is(err, store.ErrNotFound) {
		return NamespaceInfo{}, fmt.Errorf("create namespace %s: parent %s: %w", nsName(levels), nsName(levels[:len(levels)-1]), ErrNoSuchNamespace)
	}
	if err := nsErr("create", levels, err); err != nil {
		return NamespaceInfo{}, err
	}
	return NamespaceInfo{Namespace: levels, Properties: props}, nil
}

// LoadNamespace returns a namespace and its properties.
func (s *Service) LoadNamespace(ctx context.Context, cat string, levels []string) (NamespaceInfo, error) {
	if err := ValidateNamespace(levels); err != nil {
		return NamespaceInfo{}, err
	}
	ns, err := s.store.GetNamespace(ctx, cat, levels)
	if err := nsErr("load", levels, err); err != nil {
		return NamespaceInfo{}, err
	}
	props := ns.Properties
	if props == nil {
		props = map[string]string{}
	}
	return NamespaceInfo{Namespace: ns.Levels, Properties: props}, nil
}

// ListNamespaces lists the children of parent (top level when nil).
func (s *Service) ListNamespaces(ctx context.Context, cat string, parent []string, token string, limit int) ([][]string, string, error) {
	if len(parent) > 0 {
		if _, err := s.LoadNamespace(ctx, cat, parent); err != nil {
			return nil, "", err
		}
	}
	nss, next, err := s.store.ListNamespaces(ctx, cat, parent, token, limit)
	if err := nsErr("list", parent, err); err != nil {
		return nil, "", err
	}
	out := make([][]string, len(nss))
	for i, ns := range nss {
		out[i] = ns.Levels
	}
	return out, next, nil
}

// DropNamespace drops an empty namespace.
func (s *Service) DropNamespace(ctx context.Context, cat string, levels []string) error {
	if err := ValidateNamespace(levels); err != nil {
		return err
	}
	return nsErr("drop", levels, s.store.DropNamespace(ctx, cat, levels))
}

// UpdateNamespaceProperties sets and removes namespace properties.
func (s *Service) UpdateNamespaceProperties(ctx context.Context, cat string, levels []string, updates map[string]string, removals []string) (PropertiesUpdate, error) {
	if err := ValidateNamespace(levels); err != nil {
		return PropertiesUpdate{}, err
	}
	if err := checkPropertyChange(updates, removals); err != nil {
		return PropertiesUpdate{}, err
	}
	for attempt := 0; ; attempt++ {
		ns, err := s.store.GetNamespace(ctx, cat, levels)
		if err := nsErr("update", levels, err); err != nil {
			return PropertiesUpdate{}, err
		}
		props := maps.Clone(ns.Properties)
		if props == nil {
			props = map[string]string{}
		}
		res := PropertiesUpdate{Updated: []string{}, Removed: []string{}}
		for _, k := range removals {
			if _, ok := props[k]; ok {
				delete(props, k)
				res.Removed = append(res.Removed, k)
			} else {
				res.Missing = append(res.Missing, k)
			}
		}
		for k, v := range updates {
			props[k] = v
			res.Updated = append(res.Updated, k)
		}
		slices.Sort(res.Updated)
		ns.Properties = props
		err = s.store.UpdateNamespace(ctx, cat, ns)
		if errors.Is(err, store.ErrConditionFailed) && attempt < 20 {
			continue // a concurrent change (a create moved its count of children)
		}
		if err := nsErr("update", levels, err); err != nil {
			return PropertiesUpdate{}, err
		}
		return res, nil
	}
}
