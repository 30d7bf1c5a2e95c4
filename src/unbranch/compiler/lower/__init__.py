"""What the passes share to build lowered code: runtime predicates and branch functions."""
