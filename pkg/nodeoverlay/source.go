package nodeoverlay

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/events"
)

// Source reads the cluster's NodeOverlays for a pass and writes their
// status. A nil *Source reads none: nothing is overlaid.
type Source struct {
	kube     client.Client
	disabled bool
	clock    clock.Clock
	log      *slog.Logger
	recorder *events.Recorder
}

// SourceOptions configure a Source.
type SourceOptions struct {
	Kube client.Client
	// Disabled: KARPFUNC_NODE_OVERLAY=false; every NodeOverlay is refused
	// by name (condition and event), none applied.
	Disabled bool
	Clock    clock.Clock
	Logger   *slog.Logger
}

// NewSource returns a Source reading with opts.Kube.
func NewSource(opts SourceOptions) *Source {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Source{kube: opts.Kube, disabled: opts.Disabled, clock: opts.Clock, log: opts.Logger, recorder: events.NewRecorder(opts.Kube, opts.Clock)}
}

// Off reports whether overlays apply to nothing: no Source, or the
// setting is off.
func (s *Source) Off() bool { return s == nil || s.disabled }

// Read lists the NodeOverlays. A cluster without the NodeOverlay CRD has
// none.
func (s *Source) Read(ctx context.Context) ([]*v1alpha1.NodeOverlay, error) {
	if s == nil {
		return nil, nil
	}
	var list v1alpha1.NodeOverlayList
	if err := s.kube.List(ctx, &list); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing NodeOverlays: %w", err)
	}
	out := make([]*v1alpha1.NodeOverlay, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// Resolve reads the NodeOverlays and resolves them against pools and cat
// (Disabled while the setting is off). The overlays are returned for
// WriteStatus.
func (s *Source) Resolve(ctx context.Context, pools []*karpv1.NodePool, cat *catalog.Catalog) (*Resolution, []*v1alpha1.NodeOverlay, error) {
	overlays, err := s.Read(ctx)
	if err != nil || len(overlays) == 0 {
		return nil, overlays, err
	}
	if s.disabled {
		return Disabled(overlays), overlays, nil
	}
	return Resolve(overlays, pools, cat), overlays, nil
}

// WriteStatus writes each overlay's ValidationSucceeded condition from
// res (True when applied; False with the verdict's reason and message
// otherwise) where it changed, with the overlay's resourceVersion, and a
// Warning event with the same reason when an overlay is newly refused or
// refused for a new reason. Objects changed or gone since they were read
// are left to the next pass (their change asks for one).
func (s *Source) WriteStatus(ctx context.Context, overlays []*v1alpha1.NodeOverlay, res *Resolution) error {
	if s == nil || res == nil {
		return nil
	}
	byName := make(map[string]*v1alpha1.NodeOverlay, len(overlays))
	for _, o := range overlays {
		byName[o.Name] = o
	}
	var errs []error
	for _, v := range res.Verdicts {
		if o := byName[v.Name]; o != nil {
			if err := s.writeOne(ctx, o, v); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return joinErrors(errs)
}

// writeOne writes o's condition from v, and the event when v refuses it
// anew.
func (s *Source) writeOne(ctx context.Context, o *v1alpha1.NodeOverlay, v Verdict) error {
	stored := o.DeepCopy()
	before := stored.StatusConditions().Get(v1alpha1.ConditionTypeValidationSucceeded)
	conditions := o.StatusConditions(status.WithClock(s.clock))
	if v.Applied {
		conditions.SetTrue(v1alpha1.ConditionTypeValidationSucceeded)
	} else {
		conditions.SetFalse(v1alpha1.ConditionTypeValidationSucceeded, v.Reason, v.Message)
	}
	if equality.Semantic.DeepEqual(stored.Status, o.Status) {
		return nil
	}
	err := s.kube.Status().Patch(ctx, o, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("writing the status of NodeOverlay %s: %w", o.Name, err)
	}
	if v.Applied {
		s.log.Info("nodeoverlay applied", "nodeoverlay", v.Name, "weight", v.Weight, "selected", v.Selected)
		return nil
	}
	s.log.Warn("nodeoverlay not applied", "nodeoverlay", v.Name, "reason", v.Reason, "message", v.Message)
	if before != nil && !before.IsTrue() && before.Reason == v.Reason && before.Message == v.Message {
		return nil
	}
	return s.recorder.Publish(ctx, events.Event{Object: o, Type: corev1.EventTypeWarning, Reason: v.Reason, Message: v.Message})
}

func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w (and %d more)", errs[0], len(errs)-1)
}
