# python tests
