# client tests (push, sub, ctl, bench, jsonpack)
