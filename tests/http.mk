# http tests
