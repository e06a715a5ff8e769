"""The base of every plan-file object: strict, serialized like a plain dict."""

from typing import Any, ClassVar

from pydantic import model_serializer

from pdd_plan.inputs.schema.common import Strict


class Out(Strict):
    """Serializes like a plain dict; keys named in `_omit_if_none` vanish when None (they
    appear only in some plans, e.g. `dinkelbach_iterations`)."""

    _omit_if_none: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _drop_absent(self, handler: Any) -> dict[str, Any]:
        d: dict[str, Any] = handler(self)
        for k in self._omit_if_none:
            if d.get(k) is None:
                d.pop(k, None)
        return d
