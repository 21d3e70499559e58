from __future__ import annotations

import logging

logging.getLogger("minibroker").setLevel(logging.INFO)
